package opstask

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/contract/memberlease"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/ruleid"
)

// Action is what the controller does.
type Action string

const (
	// ActionWait: nothing now; look again after RequeueAfter.
	ActionWait Action = "wait"
	// ActionTransition: write NextStatus(task, decision, now).
	ActionTransition Action = "transition"
	// ActionRequest: write Request on the snapshot Lease of the task's kind (LeaseAnnotation).
	ActionRequest Action = "request"
	// ActionDelete: delete the task (its TTL ran out).
	ActionDelete Action = "delete"
)

// Rule ids.
const (
	RuleExpired          ruleid.ID = "opstask/expired"
	RuleFinished         ruleid.ID = "opstask/finished"
	RuleAccept           ruleid.ID = "opstask/accept"
	RuleRejectNoEtcdName ruleid.ID = "opstask/reject/no-etcd-name"
	RuleRejectConfig     ruleid.ID = "opstask/reject/unsupported-config"
	RuleRejectNoEtcd     ruleid.ID = "opstask/reject/etcd-not-found"
	RuleRejectDuplicate  ruleid.ID = "opstask/reject/duplicate"
	RuleRejectNoStore    ruleid.ID = "opstask/reject/no-backup-store"
	RuleAdmit            ruleid.ID = "opstask/admit"
	RuleSucceeded        ruleid.ID = "opstask/succeeded"
	RuleFailEtcdGone     ruleid.ID = "opstask/fail/etcd-gone"
	RuleFailNoStore      ruleid.ID = "opstask/fail/no-backup-store"
	RuleFailTimeout      ruleid.ID = "opstask/fail/timeout"
	RuleWaitLease        ruleid.ID = "opstask/wait/lease"
	RuleRequest          ruleid.ID = "opstask/request"
	RuleWaitSnapshot     ruleid.ID = "opstask/wait/snapshot"
)

// Error codes of lastErrors (etcd-druid's ERR_DUPLICATE_TASK among them).
const (
	ErrDuplicateTask = "ERR_DUPLICATE_TASK"
	ErrInvalidTask   = "ERR_INVALID_TASK"
	ErrEtcdNotFound  = "ERR_ETCD_NOT_FOUND"
	ErrNoBackupStore = "ERR_NO_BACKUP_STORE"
	ErrTimeout       = "ERR_SNAPSHOT_TIMEOUT"
)

// Lastoperation states.
const (
	OpInProgress = "InProgress"
	OpCompleted  = "Completed"
	OpFailed     = "Failed"
)

// Poll is how often a running task looks at its Lease.
const Poll = time.Second

// MaxLastErrors is how many errors status.lastErrors keeps (the CRD's bound).
const MaxLastErrors = 10

// Observed is what the controller read.
type Observed struct {
	Task druidv1alpha1.EtcdOpsTask
	// Etcd is the task's Etcd; nil when it does not exist.
	Etcd *druidv1alpha1.Etcd
	// BackupEnabled: the Etcd has a backup store (internal/operator/resources.BackupEnabled).
	BackupEnabled bool
	// Lease is the snapshot Lease of the task's kind, parsed; nil when it does not exist.
	Lease *memberlease.SnapshotLeaseRecord
	// Others are the other tasks of the namespace.
	Others []druidv1alpha1.EtcdOpsTask
	Now    time.Time
}

// Decision is the next step and why.
type Decision struct {
	Action Action
	Rule   ruleid.ID
	Reason string
	// State, Phase and OpState are what a transition writes: status.state, status.phase and
	// lastOperation.state; ErrorCode, when set, adds a lastErrors entry with Reason.
	State     druidv1alpha1.TaskState
	Phase     druidv1alpha1.OperationPhase
	OpState   string
	ErrorCode string
	// LeaseAnnotation and Request are what a request writes on the Lease.
	LeaseAnnotation, Request string
	RequeueAfter             time.Duration
}

// RequestValue is the value a task writes on the Lease: unique to this task object.
func RequestValue(task *druidv1alpha1.EtcdOpsTask) string {
	return "EtcdOpsTask/" + task.Name + "/" + string(task.UID)
}

// Kind is the task's snapshot kind, "" when it asks no on-demand snapshot.
func Kind(task *druidv1alpha1.EtcdOpsTask) druidv1alpha1.OnDemandSnapshotType {
	if c := task.Spec.Config.OnDemandSnapshot; c != nil {
		return c.Type
	}
	return ""
}

// Timeout is the task's bound from startedAt: etcd-druid's defaults when the spec sets none.
func Timeout(task *druidv1alpha1.EtcdOpsTask) time.Duration {
	c := task.Spec.Config.OnDemandSnapshot
	if c == nil {
		return 0
	}
	secs := int32(druidv1alpha1.DefaultOnDemandTimeoutSecondsFull)
	field := c.TimeoutSecondsFull
	if c.Type == druidv1alpha1.OnDemandSnapshotTypeDelta {
		secs, field = druidv1alpha1.DefaultOnDemandTimeoutSecondsDelta, c.TimeoutSecondsDelta
	}
	if field != nil && *field > 0 {
		secs = *field
	}
	return time.Duration(secs) * time.Second
}

// TTL is how long the task is kept once finished.
func TTL(task *druidv1alpha1.EtcdOpsTask) time.Duration {
	if t := task.Spec.TTLSecondsAfterFinished; t != nil && *t > 0 {
		return time.Duration(*t) * time.Second
	}
	return druidv1alpha1.DefaultOpsTaskTTLSeconds * time.Second
}

// Decide picks the task's next step.
func Decide(o Observed) Decision {
	task := &o.Task
	state := druidv1alpha1.TaskState("")
	if task.Status.State != nil {
		state = *task.Status.State
	}
	switch {
	case state.Finished():
		return finished(task, o.Now)
	case state == "":
		return transition(RuleAccept, druidv1alpha1.TaskStatePending, druidv1alpha1.OperationPhaseAdmit, OpInProgress, "",
			"accepted; admission checks the Etcd, its backup store and the other tasks of it")
	case state == druidv1alpha1.TaskStatePending:
		return admit(o)
	}
	return run(o)
}

func finished(task *druidv1alpha1.EtcdOpsTask, now time.Time) Decision {
	since := task.CreationTimestamp.Time
	if t := task.Status.LastTransitionTime; t != nil {
		since = t.Time
	}
	if left := since.Add(TTL(task)).Sub(now); left > 0 {
		return Decision{Action: ActionWait, Rule: RuleFinished, RequeueAfter: left,
			Reason: fmt.Sprintf("finished (%s); deleted in %s (ttlSecondsAfterFinished)", *task.Status.State, left.Round(time.Second))}
	}
	return Decision{Action: ActionDelete, Rule: RuleExpired,
		Reason: fmt.Sprintf("finished (%s) %s ago: ttlSecondsAfterFinished has passed", *task.Status.State, now.Sub(since).Round(time.Second))}
}

func admit(o Observed) Decision {
	task := &o.Task
	reject := func(rule ruleid.ID, code, reason string) Decision {
		return transition(rule, druidv1alpha1.TaskStateRejected, druidv1alpha1.OperationPhaseAdmit, OpFailed, code, reason)
	}
	if task.Spec.EtcdName == nil || *task.Spec.EtcdName == "" {
		return reject(RuleRejectNoEtcdName, ErrInvalidTask, "spec.etcdName is not set")
	}
	name := *task.Spec.EtcdName
	if Kind(task) == "" {
		return reject(RuleRejectConfig, ErrInvalidTask, "spec.config holds no operation this operator carries out (only onDemandSnapshot)")
	}
	if o.Etcd == nil {
		return reject(RuleRejectNoEtcd, ErrEtcdNotFound, fmt.Sprintf("Etcd %s/%s does not exist", task.Namespace, name))
	}
	if other := runningBefore(task, o.Others); other != "" {
		return reject(RuleRejectDuplicate, ErrDuplicateTask, fmt.Sprintf("EtcdOpsTask %s of Etcd %s is already in progress: one task per Etcd at a time", other, name))
	}
	if !o.BackupEnabled {
		return reject(RuleRejectNoStore, ErrNoBackupStore, fmt.Sprintf("Etcd %s has no backup store (spec.backup.store): there is nowhere to take a snapshot to", name))
	}
	reason := fmt.Sprintf("admitted: a %s snapshot of Etcd %s, within %s", Kind(task), name, Timeout(task))
	if c := task.Spec.Config.OnDemandSnapshot; c.IsFinal != nil && *c.IsFinal {
		reason += "; isFinal is accepted and taken as a normal full snapshot (etcd-druid takes its final snapshot before a scale-down to 0; the cluster is not changed here)"
	}
	return transition(RuleAdmit, druidv1alpha1.TaskStateInProgress, druidv1alpha1.OperationPhaseRunning, OpInProgress, "", reason)
}

// runningBefore names another unfinished task of the same Etcd that goes first: one in progress,
// or one pending that was created before this one (by name when at the same second), so that of
// two tasks created together one is admitted.
func runningBefore(task *druidv1alpha1.EtcdOpsTask, others []druidv1alpha1.EtcdOpsTask) string {
	for i := range others {
		other := &others[i]
		if other.UID == task.UID || other.Spec.EtcdName == nil || *other.Spec.EtcdName != *task.Spec.EtcdName || other.DeletionTimestamp != nil {
			continue
		}
		switch {
		case other.Status.State == nil || *other.Status.State == druidv1alpha1.TaskStatePending:
			if earlier(other, task) {
				return other.Name
			}
		case *other.Status.State == druidv1alpha1.TaskStateInProgress:
			return other.Name
		}
	}
	return ""
}

func earlier(a, b *druidv1alpha1.EtcdOpsTask) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	return a.Name < b.Name
}

func run(o Observed) Decision {
	task := &o.Task
	kind := Kind(task)
	request := RequestValue(task)
	fail := func(rule ruleid.ID, code, reason string) Decision {
		return transition(rule, druidv1alpha1.TaskStateFailed, druidv1alpha1.OperationPhaseRunning, OpFailed, code, reason)
	}
	if o.Etcd == nil {
		return fail(RuleFailEtcdGone, ErrEtcdNotFound, fmt.Sprintf("Etcd %s was deleted before the snapshot was taken", ptrString(task.Spec.EtcdName)))
	}
	requested, handled, annotation := "", "", memberlease.AnnotationFullSnapshotRequest
	if l := o.Lease; l != nil {
		requested, handled = l.Requested, l.Handled
		if kind == druidv1alpha1.OnDemandSnapshotTypeDelta {
			requested, handled = l.DeltaRequested, l.DeltaHandled
		}
	}
	if kind == druidv1alpha1.OnDemandSnapshotTypeDelta {
		annotation = memberlease.AnnotationDeltaSnapshotRequest
	}
	if o.Lease != nil && handled == request {
		return transition(RuleSucceeded, druidv1alpha1.TaskStateSucceeded, druidv1alpha1.OperationPhaseRunning, OpCompleted, "", succeeded(task, *o.Lease))
	}
	started := task.CreationTimestamp.Time
	if task.Status.StartedAt != nil {
		started = task.Status.StartedAt.Time
	}
	deadline := started.Add(Timeout(task))
	if !o.Now.Before(deadline) {
		reason := fmt.Sprintf("the %s snapshot was not taken within %s", kind, Timeout(task))
		if l := o.Lease; l != nil && l.Error != "" {
			reason += fmt.Sprintf("; the backup loop's last failure: %s: %s", l.ErrorReason, l.Error)
		}
		return fail(RuleFailTimeout, ErrTimeout, reason)
	}
	if !o.BackupEnabled {
		return fail(RuleFailNoStore, ErrNoBackupStore, fmt.Sprintf("Etcd %s no longer has a backup store", *task.Spec.EtcdName))
	}
	wait := min(Poll, deadline.Sub(o.Now))
	if o.Lease == nil {
		return Decision{Action: ActionWait, Rule: RuleWaitLease, RequeueAfter: wait,
			Reason: "the snapshot Lease does not exist yet: the Etcd controller creates it"}
	}
	if requested != request {
		return Decision{Action: ActionRequest, Rule: RuleRequest, LeaseAnnotation: annotation, Request: request, RequeueAfter: wait,
			Reason: fmt.Sprintf("asking the leading member's backup loop for a %s snapshot (%s=%s)", kind, annotation, request)}
	}
	return Decision{Action: ActionWait, Rule: RuleWaitSnapshot, RequeueAfter: wait,
		Reason: fmt.Sprintf("waiting for the backup loop to take the %s snapshot (until %s)", kind, deadline.UTC().Format(time.RFC3339))}
}

func succeeded(task *druidv1alpha1.EtcdOpsTask, l memberlease.SnapshotLeaseRecord) string {
	kind := Kind(task)
	var msg string
	switch {
	case l.Key != "":
		msg = fmt.Sprintf("%s snapshot taken at revision %d: %s (%d bytes)", kind, l.Revision, l.Key, l.Size)
	default:
		msg = fmt.Sprintf("%s snapshot: nothing was written since revision %d, which the store already holds; no object written", kind, l.Revision)
	}
	if c := task.Spec.Config.OnDemandSnapshot; c.IsFinal != nil && *c.IsFinal {
		msg += "; isFinal: taken as a normal full snapshot"
	}
	return msg
}

func transition(rule ruleid.ID, state druidv1alpha1.TaskState, phase druidv1alpha1.OperationPhase, op, code, reason string) Decision {
	return Decision{Action: ActionTransition, Rule: rule, Reason: reason, State: state, Phase: phase, OpState: op, ErrorCode: code}
}

// NextStatus is the status a transition leaves: the state and phase, lastTransitionTime when
// the state changes, startedAt when the task goes InProgress, lastOperation, and the error, if
// any, added to the latest MaxLastErrors.
func NextStatus(old druidv1alpha1.EtcdOpsTaskStatus, d Decision, now time.Time) druidv1alpha1.EtcdOpsTaskStatus {
	s := *old.DeepCopy()
	at := metav1.NewTime(now)
	if s.State == nil || *s.State != d.State {
		state := d.State
		s.State, s.LastTransitionTime = &state, &at
	}
	if d.State == druidv1alpha1.TaskStateInProgress && s.StartedAt == nil {
		s.StartedAt = &at
	}
	phase := d.Phase
	s.Phase = &phase
	s.LastOperation = &druidv1alpha1.LastOperation{Type: string(d.Phase), State: d.OpState, Description: d.Reason, LastUpdateTime: at}
	if d.ErrorCode != "" {
		s.LastErrors = append(s.LastErrors, druidv1alpha1.LastError{Code: d.ErrorCode, Description: d.Reason, ObservedAt: at})
		if n := len(s.LastErrors); n > MaxLastErrors {
			s.LastErrors = s.LastErrors[n-MaxLastErrors:]
		}
	}
	return s
}

func ptrString(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
