package resources

import (
	"fmt"
	"strconv"
	"time"

	"github.com/robfig/cron/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/contract/memberpod"
)

// This file turns etcd-druid's etcd settings (spec.etcd.*, spec.sharedConfig,
// spec.schedulingConstraints) into what the members run with, and checks them.

const (
	// DefaultQuota is etcd-druid's default backend quota.
	DefaultQuota = "8Gi"
	// DefaultAutoCompactionRetention is etcd-druid's periodic auto-compaction retention, used when
	// spec.sharedConfig sets none (AutoCompaction).
	DefaultAutoCompactionRetention = "30m"
	// DefaultSnapshotCount is the raft snapshot interval when spec.etcd.snapshotCount is unset.
	DefaultSnapshotCount = int64(75000)
	// DefaultDefragTimeout bounds one member's defragmentation when etcdDefragTimeout is unset.
	// etcd-druid's default is 15m (docs/druid-compatibility.md lists the defaults that differ).
	DefaultDefragTimeout = 8 * time.Minute
	// DefaultMemberAgentInterval is the Lease renew interval when neither the Etcd nor the
	// operator sets one.
	DefaultMemberAgentInterval = 2 * time.Second
	// MinHeartbeatDuration keeps a typo such as 10ms from turning every member into a Lease
	// writer that floods the apiserver.
	MinHeartbeatDuration = time.Second
	// leaseRenewalsPerDuration is how many renewals fit in a Lease's duration: a member is seen as
	// gone only after missing that many in a row.
	leaseRenewalsPerDuration = 3
)

// Error codes of invalid etcd settings, for status.lastErrors.
const (
	ErrInvalidQuota                   = "ERR_INVALID_QUOTA"
	ErrInvalidMetrics                 = "ERR_INVALID_METRICS"
	ErrInvalidFreelistType            = "ERR_INVALID_FREELIST_TYPE"
	ErrInvalidCompaction              = "ERR_INVALID_AUTO_COMPACTION"
	ErrInvalidDefragmentationSchedule = "ERR_INVALID_DEFRAGMENTATION_SCHEDULE"
	ErrInvalidDuration                = "ERR_INVALID_DURATION"
)

// Quota is spec.etcd.quota or etcd-druid's default, in bytes.
func Quota(e *druidv1alpha1.Etcd) int64 {
	if q := e.Spec.Etcd.Quota; q != nil {
		return q.Value()
	}
	q := resource.MustParse(DefaultQuota)
	return q.Value()
}

// StorageCapacity is spec.storageCapacity or the default.
func StorageCapacity(e *druidv1alpha1.Etcd) resource.Quantity {
	if c := e.Spec.StorageCapacity; c != nil {
		return *c
	}
	return resource.MustParse(DefaultStorageCapacity)
}

// SettingsEnvironment is the ETCD_* variables that carry the Etcd's etcd settings. Optional
// settings are left out when unset, so etcd's own default applies and the configuration (and
// with it the pod template) of an Etcd that does not use them stays as it was; auto-compaction is
// the exception, with etcd-druid's default (AutoCompaction).
func SettingsEnvironment(e *druidv1alpha1.Etcd) map[string]string {
	env := map[string]string{
		"ETCD_QUOTA_BACKEND_BYTES": strconv.FormatInt(Quota(e), 10),
		"ETCD_SNAPSHOT_COUNT":      strconv.FormatInt(snapshotCount(e), 10),
	}
	if m := e.Spec.Etcd.Metrics; m != nil {
		env["ETCD_METRICS"] = string(*m)
	}
	if g := e.Spec.Etcd.EnableGRPCGateway; g != nil {
		env["ETCD_ENABLE_GRPC_GATEWAY"] = strconv.FormatBool(*g)
	}
	// etcd 3.4 and later read it (the operator runs 3.6 and 3.7).
	if f := e.Spec.Etcd.BackendBboltFreelistType; f != nil {
		env["ETCD_BACKEND_BBOLT_FREELIST_TYPE"] = string(*f)
	}
	mode, retention := AutoCompaction(e)
	if mode != nil {
		env["ETCD_AUTO_COMPACTION_MODE"] = string(*mode)
	}
	if retention != nil {
		env["ETCD_AUTO_COMPACTION_RETENTION"] = *retention
	}
	return env
}

// AutoCompaction is the auto-compaction the members run with; nil leaves etcd's own default.
// Explicit settings are kept as written. Without a retention, periodic mode gets etcd-druid's
// default of 30m (and an unset mode becomes periodic with it), so an etcd-druid manifest without
// sharedConfig compacts as it did under etcd-druid instead of growing until NOSPACE; etcd's own
// default keeps all history. This changed the configuration, and so rolled the members, of every
// Etcd without a retention when it was introduced; autoCompactionRetention "0" turns compaction
// off. Revision mode without a retention keeps etcd's default (off): etcd-druid's 30m is not a
// revision count, and etcd refuses it there.
func AutoCompaction(e *druidv1alpha1.Etcd) (mode *druidv1alpha1.CompactionMode, retention *string) {
	if c := e.Spec.SharedConfig; c != nil {
		mode, retention = c.AutoCompactionMode, c.AutoCompactionRetention
	}
	if retention == nil && (mode == nil || *mode == druidv1alpha1.CompactionPeriodic) {
		periodic, defaultRetention := druidv1alpha1.CompactionPeriodic, DefaultAutoCompactionRetention
		return &periodic, &defaultRetention
	}
	return mode, retention
}

// PeerSkipClientSANVerification is spec.etcd.peerUrlTls.skipClientSANVerification, true when
// unset. The default differs from etcd-druid's (check) because it is what this operator always
// did: the peer certificates it documents carry wildcard DNS names, which etcd's SAN check cannot
// match against a peer's address, so checking by default would cut every such cluster's peers
// apart. The CA check applies either way.
func PeerSkipClientSANVerification(e *druidv1alpha1.Etcd) bool {
	if p := e.Spec.Etcd.PeerUrlTLS; p != nil && p.SkipClientSANVerification != nil {
		return *p.SkipClientSANVerification
	}
	return true
}

func snapshotCount(e *druidv1alpha1.Etcd) int64 {
	if c := e.Spec.Etcd.SnapshotCount; c != nil {
		return *c
	}
	return DefaultSnapshotCount
}

// MemberAgentInterval is how often a member's agent renews its Lease: spec.etcd.heartbeatDuration,
// else the operator's setting, else the default.
func MemberAgentInterval(e *druidv1alpha1.Etcd, s Settings) time.Duration {
	if h := e.Spec.Etcd.HeartbeatDuration; h != nil && h.Duration > 0 {
		return h.Duration
	}
	if d, err := time.ParseDuration(s.MemberAgentInterval); err == nil && d > 0 {
		return d
	}
	return DefaultMemberAgentInterval
}

// MemberLeaseDurationSeconds is the member Leases' duration: LeaseDurationSeconds, stretched for a
// long heartbeatDuration so that a few renewals always fit in it.
func MemberLeaseDurationSeconds(e *druidv1alpha1.Etcd) int32 {
	d := LeaseDurationSeconds
	if h := e.Spec.Etcd.HeartbeatDuration; h != nil {
		if need := int32((leaseRenewalsPerDuration*h.Duration + time.Second - 1) / time.Second); need > d {
			d = need
		}
	}
	return d
}

// DefragTimeout bounds one member's defragmentation.
func DefragTimeout(e *druidv1alpha1.Etcd) time.Duration {
	if t := e.Spec.Etcd.EtcdDefragTimeout; t != nil && t.Duration > 0 {
		return t.Duration
	}
	return DefaultDefragTimeout
}

// DefragmentationSchedule parses spec.etcd.defragmentationSchedule; nil without error when unset.
func DefragmentationSchedule(e *druidv1alpha1.Etcd) (cron.Schedule, error) {
	s := e.Spec.Etcd.DefragmentationSchedule
	if s == nil || *s == "" {
		return nil, nil
	}
	return memberpod.ParseSchedule(*s)
}

// applySchedulingConstraints copies spec.schedulingConstraints onto the member pod spec.
func applySchedulingConstraints(pod *corev1.PodSpec, e *druidv1alpha1.Etcd) {
	c := e.Spec.SchedulingConstraints
	if c == nil {
		return
	}
	if c.Affinity != nil {
		pod.Affinity = c.Affinity.DeepCopy()
	}
	for _, t := range c.TopologySpreadConstraints {
		pod.TopologySpreadConstraints = append(pod.TopologySpreadConstraints, *t.DeepCopy())
	}
}

// validateSettings checks the etcd settings. A problem stops the reconciler before it changes
// anything, so the members keep running with the previous, valid settings.
func validateSettings(e *druidv1alpha1.Etcd) []Problem {
	var problems []Problem
	add := func(code, format string, args ...any) {
		problems = append(problems, Problem{Code: code, Message: fmt.Sprintf(format, args...)})
	}
	if q := e.Spec.Etcd.Quota; q != nil {
		capacity := StorageCapacity(e)
		switch {
		case q.Sign() <= 0:
			add(ErrInvalidQuota, "spec.etcd.quota is %s: it must be positive", q.String())
		case q.Cmp(capacity) > 0:
			add(ErrInvalidQuota, "spec.etcd.quota %s exceeds the data volume (storageCapacity %s): the disk would fill before etcd raises its NOSPACE alarm", q.String(), capacity.String())
		}
	}
	if m := e.Spec.Etcd.Metrics; m != nil && *m != druidv1alpha1.MetricsBasic && *m != druidv1alpha1.MetricsExtensive {
		add(ErrInvalidMetrics, "spec.etcd.metrics is %q: it must be basic or extensive", *m)
	}
	// etcd reads any value but array as map, so a typo would pass unnoticed.
	if f := e.Spec.Etcd.BackendBboltFreelistType; f != nil && *f != druidv1alpha1.BboltFreelistArray && *f != druidv1alpha1.BboltFreelistMap {
		add(ErrInvalidFreelistType, "spec.etcd.backendBboltFreelistType is %q: it must be array or map", *f)
	}
	if c := e.Spec.SharedConfig; c != nil {
		problems = append(problems, validateCompaction(c)...)
	}
	if _, err := DefragmentationSchedule(e); err != nil {
		add(ErrInvalidDefragmentationSchedule, "spec.etcd.defragmentationSchedule: %v (want five fields: minute hour day-of-month month day-of-week)", err)
	}
	if h := e.Spec.Etcd.HeartbeatDuration; h != nil && h.Duration < MinHeartbeatDuration {
		add(ErrInvalidDuration, "spec.etcd.heartbeatDuration is %s: it must be at least %s", h.Duration, MinHeartbeatDuration)
	}
	if t := e.Spec.Etcd.EtcdDefragTimeout; t != nil && t.Duration <= 0 {
		add(ErrInvalidDuration, "spec.etcd.etcdDefragTimeout is %s: it must be positive", t.Duration)
	}
	problems = append(problems, validateBackup(e)...)
	return problems
}

// validateCompaction checks the retention against the mode the way etcd reads it: periodic takes a
// duration or a number of hours, revision a number of revisions.
func validateCompaction(c *druidv1alpha1.SharedConfig) []Problem {
	mode := druidv1alpha1.CompactionPeriodic // etcd's default mode
	if c.AutoCompactionMode != nil {
		mode = *c.AutoCompactionMode
	}
	bad := func(format string, args ...any) []Problem {
		return []Problem{{Code: ErrInvalidCompaction, Message: fmt.Sprintf(format, args...)}}
	}
	switch mode {
	case druidv1alpha1.CompactionPeriodic, druidv1alpha1.CompactionRevision:
	default:
		return bad("spec.sharedConfig.autoCompactionMode is %q: it must be periodic or revision", mode)
	}
	if c.AutoCompactionRetention == nil {
		return nil
	}
	r := *c.AutoCompactionRetention
	if n, err := strconv.ParseInt(r, 10, 64); err == nil {
		if n < 0 {
			return bad("spec.sharedConfig.autoCompactionRetention is %q: it must not be negative", r)
		}
		return nil
	}
	if mode == druidv1alpha1.CompactionRevision {
		return bad("spec.sharedConfig.autoCompactionRetention is %q: in revision mode it must be a number of revisions", r)
	}
	if d, err := time.ParseDuration(r); err != nil || d < 0 {
		return bad("spec.sharedConfig.autoCompactionRetention is %q: in periodic mode it must be a duration (30m, 1h) or a number of hours", r)
	}
	return nil
}

// MergeAnnotations returns existing with desired's entries set on top, for reconcilers that must
// keep what other writers put on an object.
func MergeAnnotations(existing, desired map[string]string) map[string]string {
	return mergeAnnotations(existing, desired)
}
