package etcd

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
)

// ErrQuotaBelowDBSize: the new quota is smaller than a member's database, so etcd would raise
// NOSPACE on the first write after the restart and the cluster would stop taking writes.
const ErrQuotaBelowDBSize = "ERR_QUOTA_BELOW_DB_SIZE"

// +kubebuilder:rbac:groups="",resources=pods,verbs=list
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get

// quotaLowering is a spec.etcd.quota below the one the members run with (the ConfigMap's).
type quotaLowering struct {
	current, want int64
}

// observeQuota tells whether spec.etcd.quota is lowered: only a lowering can leave a member's
// database above it, so the members are asked for their sizes only then.
func (r *Reconciler) observeQuota(ctx context.Context, etcd *druidv1alpha1.Etcd) *quotaLowering {
	if r.pool == nil || etcd.Spec.Etcd.Quota == nil {
		return nil
	}
	want := resources.Quota(etcd)
	cm := &corev1.ConfigMap{}
	if err := r.client.Get(ctx, types.NamespacedName{Namespace: etcd.Namespace, Name: resources.ConfigMapName(etcd)}, cm); err != nil {
		if !apierrors.IsNotFound(err) {
			logr.FromContextOrDiscard(ctx).Info("Cannot read the current quota; not checking the new one against the members", "error", err.Error())
		}
		return nil
	}
	current, err := strconv.ParseInt(cm.Data["ETCD_QUOTA_BACKEND_BYTES"], 10, 64)
	if err != nil || want >= current {
		return nil
	}
	return &quotaLowering{current: current, want: want}
}

// checkQuotaAgainstDB refuses a lowered spec.etcd.quota that a member's database (the backend
// file, which etcd's quota is checked against) already exceeds. When no member answers the change
// goes ahead with a warning: refusing would also hold back any fix made in the same edit.
func (r *Reconciler) checkQuotaAgainstDB(etcd *druidv1alpha1.Etcd, o *observation) []resources.Problem {
	if o.quota == nil {
		return nil
	}
	sizes := map[string]int64{}
	if o.status != nil {
		for _, m := range o.status.Members {
			if m.Reachable {
				sizes[m.Name] = m.DBSize
			}
		}
	}
	if len(sizes) == 0 {
		r.recorder.Eventf(etcd, corev1.EventTypeWarning, "QuotaUnverified",
			"spec.etcd.quota lowered from %d to %d bytes without checking it against the members' database sizes: %v", o.quota.current, o.quota.want, o.membersErr)
		return nil
	}
	names := slices.Sorted(maps.Keys(sizes))
	var problems []resources.Problem
	for _, name := range names {
		if size := sizes[name]; size >= o.quota.want {
			problems = append(problems, resources.Problem{Code: ErrQuotaBelowDBSize, Message: fmt.Sprintf(
				"spec.etcd.quota %s (%d bytes) is not above member %s's database size (%d bytes): etcd would raise NOSPACE and stop taking writes; defragment or delete data first, or keep the quota at %d bytes",
				etcd.Spec.Etcd.Quota.String(), o.quota.want, name, size, o.quota.current)})
		}
	}
	return problems
}
