package etcd

import (
	"context"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/resources"
)

// EventReasonTrustChanged marks the rolling restart a changed CA bundle starts.
const EventReasonTrustChanged = "TrustChanged"

// defaultTrustRecheck is how often the CA Secrets of an Etcd with TLS are read again: Secrets are not
// watched (the operator may only get them), and a rotation is planned hours ahead, so a couple of
// minutes late is soon enough, at two Secret reads per Etcd per period.
const defaultTrustRecheck = 2 * time.Minute

// planTrust decides the trust checksums for the StatefulSet and its pod template
// (resources.TrustRestart): a changed CA bundle restarts the members, in the rollout's
// quorum-safe order, so that each one trusts it (etcd reads its CA files only at start).
//
// The Secrets are read at most once a trustRecheck per Etcd, and not at the first reconcile after
// the operator started when the StatefulSet holds a record already: a restart over a settled
// fleet then reads nothing (a CA changed meanwhile is seen one period later).
func (r *Reconciler) planTrust(ctx context.Context, etcd *druidv1alpha1.Etcd) (template, record string, err error) {
	sts, err := r.runningStatefulSet(ctx, etcd)
	if err != nil {
		return "", "", err
	}
	if sts == nil {
		template, record = resources.TrustRestart("", "", r.trustChecksum(ctx, etcd))
		return template, record, nil
	}
	running, recorded := sts.Spec.Template.Annotations[resources.AnnotationTrustChecksum], sts.Annotations[resources.AnnotationTrustChecksum]
	if recorded != "" && !r.trustDue(etcd) {
		return running, recorded, nil
	}
	current := r.trustChecksum(ctx, etcd)
	template, record = resources.TrustRestart(running, recorded, current)
	if template != running {
		logr.FromContextOrDiscard(ctx).Info("CA bundle changed; restarting the members one at a time so each trusts it",
			"from", recorded, "to", current)
		r.recorder.Eventf(etcd, corev1.EventTypeNormal, EventReasonTrustChanged,
			"the CA bundle the members trust changed (checksum %s → %s): each member restarts to load it, one at a time, the leader last", recorded, current)
	}
	return template, record, nil
}

// trustDue tells whether the Etcd's CA Secrets are to be read now, and if so notes the time. The
// first look after the operator started only starts the period.
func (r *Reconciler) trustDue(etcd *druidv1alpha1.Etcd) bool {
	key := etcd.Namespace + "/" + etcd.Name
	now := time.Now()
	r.trustMu.Lock()
	defer r.trustMu.Unlock()
	last, seen := r.trustChecked[key]
	if seen && now.Sub(last) < r.trustRecheck {
		return false
	}
	r.trustChecked[key] = now
	return seen
}

// forgetTrust drops what trustDue noted for an Etcd that is gone.
func (r *Reconciler) forgetTrust(key types.NamespacedName) {
	r.trustMu.Lock()
	defer r.trustMu.Unlock()
	delete(r.trustChecked, key.String())
}

// trustChecksum is the checksum of the CA bundles the Etcd names, read now; "" without TLS or
// when a Secret cannot be read (then nothing restarts; validation reports a missing Secret).
func (r *Reconciler) trustChecksum(ctx context.Context, etcd *druidv1alpha1.Etcd) string {
	refs := map[string]*druidv1alpha1.SecretReference{}
	if c := etcd.Spec.Etcd.ClientUrlTLS; c != nil {
		refs["client"] = &c.TLSCASecretRef
	}
	if p := etcd.Spec.Etcd.PeerUrlTLS.TLS(); p != nil {
		refs["peer"] = &p.TLSCASecretRef
	}
	if len(refs) == 0 {
		return ""
	}
	bundles := map[string][]byte{}
	for kind, ref := range refs {
		secret := &corev1.Secret{}
		if err := r.apiReader.Get(ctx, types.NamespacedName{Namespace: etcd.Namespace, Name: ref.Name}, secret); err != nil {
			logr.FromContextOrDiscard(ctx).Info("Cannot read a CA Secret; the members' trust is left as it is", "secret", ref.Name, "error", err.Error())
			return ""
		}
		bundles[kind] = secret.Data[resources.CADataKey(*ref)]
	}
	return resources.TrustChecksum(bundles)
}
