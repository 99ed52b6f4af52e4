package etcd

import (
	"context"
	"fmt"
	"sort"
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

// DBSizes reports each answering member's database size in bytes.
type DBSizes func(ctx context.Context, etcd *druidv1alpha1.Etcd) (map[string]int64, error)

// +kubebuilder:rbac:groups="",resources=pods,verbs=list
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get

// checkQuotaAgainstDB refuses a lowered spec.etcd.quota that a member's database already exceeds.
// Only a lowering can do that, so the members are asked only then: the current quota is what the
// ConfigMap the members run with says. When no member answers the change goes ahead with a
// warning: refusing would also hold back any fix made in the same edit.
func (r *Reconciler) checkQuotaAgainstDB(ctx context.Context, etcd *druidv1alpha1.Etcd) []resources.Problem {
	if r.dbSizes == nil || etcd.Spec.Etcd.Quota == nil {
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
	sizes, err := r.dbSizes(ctx, etcd)
	if err != nil || len(sizes) == 0 {
		r.recorder.Eventf(etcd, corev1.EventTypeWarning, "QuotaUnverified",
			"spec.etcd.quota lowered from %d to %d bytes without checking it against the members' database sizes: %v", current, want, err)
		return nil
	}
	names := make([]string, 0, len(sizes))
	for name := range sizes {
		names = append(names, name)
	}
	sort.Strings(names)
	var problems []resources.Problem
	for _, name := range names {
		if size := sizes[name]; size >= want {
			problems = append(problems, resources.Problem{Code: ErrQuotaBelowDBSize, Message: fmt.Sprintf(
				"spec.etcd.quota %s (%d bytes) is not above member %s's database size (%d bytes): etcd would raise NOSPACE and stop taking writes; defragment or delete data first, or keep the quota at %d bytes",
				etcd.Spec.Etcd.Quota.String(), want, name, size, current)})
		}
	}
	return problems
}
