package etcd

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/render"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/trustchange"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
)

// The member TLS Secret is the operator's own (resources.MemberTLSSecretName): created and
// updated here, deleted with the Etcd by the garbage collector. Only that one is written; the
// Etcd's Secrets are only read.
// +kubebuilder:rbac:groups="",resources=secrets,verbs=create;update

// defaultTrustRecheck is how often the TLS Secrets of an Etcd are read again: Secrets are not
// watched (the operator may not list them), and a rotation is planned hours ahead, so a couple of
// minutes late is soon enough, at a few Secret reads per Etcd per period.
const defaultTrustRecheck = 2 * time.Minute

// defaultSecretPropagation bounds how long the kubelet takes to put a changed Secret into the
// files of the pods that mount it: its sync period (1 minute by default) plus the time to see the
// change. A CA leaves the members' trust only that long after the certificates it no longer signs
// were replaced.
const defaultSecretPropagation = 2 * time.Minute

// trustObservation is what the TLS material was read from: the trust checksum the running
// template carries, the member TLS Secret, or why the material could not be read.
type trustObservation struct {
	running string
	secret  *corev1.Secret
	err     error
}

// observeTrust reads what internal/decide/trustchange decides on: the Etcd's TLS Secrets and the
// member TLS Secret the members mount. nil when the material is not read this pass: the Etcd has
// no TLS, or the members mount the member TLS Secret already and it is not due. The Etcd's
// Secrets are read at most once a trustRecheck per Etcd (every render.TrustStepRecheck while a
// change is under way), and not at the first reconcile after the operator started: a restart over
// a settled fleet then reads nothing (a change made meanwhile is seen one period later).
func (r *Reconciler) observeTrust(ctx context.Context, etcd *druidv1alpha1.Etcd, sts *appsv1.StatefulSet) (*trustchange.Observed, trustObservation) {
	if !resources.UsesTLS(etcd) {
		return nil, trustObservation{}
	}
	var t trustObservation
	if sts != nil {
		t.running = sts.Spec.Template.Annotations[resources.AnnotationTrustChecksum]
		if t.running != "" && resources.MountsMemberTLS(sts, etcd) && !r.trustDue(etcd) {
			return nil, t
		}
	}
	user, err := r.userTLSMaterial(ctx, etcd)
	if err != nil {
		if t.running == "" {
			t.err = err
			return nil, t
		}
		// The members run on what they mount; a Secret deleted or unreadable now changes nothing
		// (what uses it reports it) and must not stop the rest of the reconcile.
		logr.FromContextOrDiscard(ctx).Info("Cannot read the Etcd's TLS Secrets; the members' TLS material is left as it is", "error", err.Error())
		return nil, t
	}
	if t.secret, t.err = r.memberTLSSecret(ctx, etcd); t.err != nil {
		return nil, t
	}
	held := resources.MemberTLSMaterial(t.secret)
	replicas := int(etcd.Spec.Replicas)
	if sts != nil {
		replicas = max(replicas, int(ptr.Deref(sts.Spec.Replicas, 0)))
	}
	return &trustchange.Observed{
		User: user, Held: held,
		MembersTrustHeld: membersRunTrust(sts, etcd, resources.TrustChecksum(held)),
		CopiedSettled:    r.copiesSettled(t.secret),
		Now:              time.Now(),
		Need:             resources.CertificateNeed(etcd, replicas),
		Secrets:          resources.CertificateSecrets(etcd),
	}, t
}

// actOnTrust writes the TLS material internal/decide/trustchange decided on into the member TLS
// Secret when it changes, records the TrustChange condition, and returns the trust checksum for the
// pod template: a change of the CA bundles restarts the members, in the rollout's quorum-safe
// order, so that each one trusts them (etcd reads its CA files only at start).
func (r *Reconciler) actOnTrust(ctx context.Context, etcd *druidv1alpha1.Etcd, o *observation, d render.Decision) (string, error) {
	if o.trust.err != nil {
		return "", o.trust.err
	}
	if d.Trust == nil {
		return o.trust.running, nil
	}
	t := *d.Trust
	if t.Write {
		if err := r.writeMemberTLS(ctx, etcd, o.trust.secret, t); err != nil {
			return "", err
		}
	}
	if t.Write || t.Waiting {
		r.trustSoon(etcd)
	}
	if t.Warning {
		logr.FromContextOrDiscard(ctx).Info("TLS material of the Etcd not used", "rule", t.Rule, "reason", t.Reason)
	}
	if c, ok := d.Change(render.PartTrust); ok {
		if err := r.recordChange(ctx, etcd, c); err != nil {
			return "", err
		}
	}
	return resources.TrustChecksum(t.Held), nil
}

// userTLSMaterial reads the Secrets the Etcd names, uncached.
func (r *Reconciler) userTLSMaterial(ctx context.Context, etcd *druidv1alpha1.Etcd) (trustchange.Material, error) {
	secrets := map[string]*corev1.Secret{}
	for _, name := range resources.UserTLSSecrets(etcd) {
		if name == resources.MemberTLSSecretName(etcd) {
			return trustchange.Material{}, fmt.Errorf("the Etcd names Secret %s, the name of the Secret the operator writes the members' TLS material into: rename it", name)
		}
		secret := &corev1.Secret{}
		if err := r.apiReader.Get(ctx, types.NamespacedName{Namespace: etcd.Namespace, Name: name}, secret); err != nil {
			return trustchange.Material{}, fmt.Errorf("reading TLS Secret %s/%s: %w", etcd.Namespace, name, err)
		}
		secrets[name] = secret
	}
	return resources.UserTLSMaterial(etcd, secrets), nil
}

// memberTLSSecret reads the member TLS Secret, uncached (Secrets are not cached); nil when there is
// none. One of that name the Etcd does not control is never read from nor written to.
func (r *Reconciler) memberTLSSecret(ctx context.Context, etcd *druidv1alpha1.Etcd) (*corev1.Secret, error) {
	secret := &corev1.Secret{}
	err := r.apiReader.Get(ctx, types.NamespacedName{Namespace: etcd.Namespace, Name: resources.MemberTLSSecretName(etcd)}, secret)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading the member TLS Secret: %w", err)
	case !metav1.IsControlledBy(secret, etcd):
		return nil, r.foreignObject(secret)
	}
	return secret, nil
}

// writeMemberTLS creates or updates the member TLS Secret with d's material, noting when
// certificates were copied into it.
func (r *Reconciler) writeMemberTLS(ctx context.Context, etcd *druidv1alpha1.Etcd, existing *corev1.Secret, d trustchange.Decision) error {
	secret := existing
	if secret == nil {
		secret = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: resources.MemberTLSSecretName(etcd), Namespace: etcd.Namespace,
			Labels: resources.Labels(etcd)}, Type: corev1.SecretTypeOpaque}
		resources.MarkProtection(etcd, secret)
		if err := controllerutil.SetControllerReference(etcd, secret, r.client.Scheme()); err != nil {
			return err
		}
	}
	secret.Data = resources.MemberTLSData(d.Held)
	if d.CopiedCertificates {
		if secret.Annotations == nil {
			secret.Annotations = map[string]string{}
		}
		secret.Annotations[resources.AnnotationCertificatesCopiedAt] = time.Now().UTC().Format(time.RFC3339)
	}
	if existing == nil {
		if err := r.client.Create(ctx, secret); err != nil {
			return fmt.Errorf("creating the member TLS Secret: %w", err)
		}
		return nil
	}
	if err := r.client.Update(ctx, secret); err != nil {
		return fmt.Errorf("updating the member TLS Secret (%s): %w", d.Rule, err)
	}
	return nil
}

// membersRunTrust tells whether every member pod was created from the pod template restarted for
// the trust checksum, as the StatefulSet controller last counted them. Ready or not: a member that
// runs trusts what that template mounts, and one that does not run yet will start on it (a pod
// created again is created from the current template). Waiting for every member to be ready
// would hold a renewed certificate back while one member is down, possibly until the one in use
// expires.
func membersRunTrust(sts *appsv1.StatefulSet, etcd *druidv1alpha1.Etcd, checksum string) bool {
	if sts == nil || sts.Spec.Template.Annotations[resources.AnnotationTrustChecksum] != checksum || !resources.MountsMemberTLS(sts, etcd) {
		return false
	}
	st := sts.Status
	return st.ObservedGeneration >= sts.Generation && st.UpdatedReplicas == ptr.Deref(sts.Spec.Replicas, 0)
}

// copiesSettled tells whether the certificates copied last into the member TLS Secret are old
// enough to be in every pod's files.
func (r *Reconciler) copiesSettled(secret *corev1.Secret) bool {
	if secret == nil {
		return false
	}
	at, err := time.Parse(time.RFC3339, secret.Annotations[resources.AnnotationCertificatesCopiedAt])
	if err != nil {
		// Not noted: copied by hand, or never: waiting once more is the safe side.
		return secret.CreationTimestamp.Add(r.secretPropagation).Before(time.Now())
	}
	return time.Since(at) >= r.secretPropagation
}

// trustDue tells whether the Etcd's TLS Secrets are to be read now, and if so notes the time. The
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

// trustSoon makes the Etcd's TLS Secrets due at the next look, and the next look come within
// render.TrustStepRecheck (trustRequeue): a change is under way.
func (r *Reconciler) trustSoon(etcd *druidv1alpha1.Etcd) {
	r.trustMu.Lock()
	defer r.trustMu.Unlock()
	r.trustChecked[etcd.Namespace+"/"+etcd.Name] = time.Now().Add(-r.trustRecheck)
}

// trustRequeue is how soon the Etcd is to be looked at again for its TLS material: soon while a
// change is under way, else once a trustRecheck.
func (r *Reconciler) trustRequeue(etcd *druidv1alpha1.Etcd) time.Duration {
	r.trustMu.Lock()
	defer r.trustMu.Unlock()
	if last, ok := r.trustChecked[etcd.Namespace+"/"+etcd.Name]; ok && time.Since(last) >= r.trustRecheck {
		return render.TrustStepRecheck
	}
	return r.trustRecheck
}

// forgetTrust drops what trustDue noted for an Etcd that is gone.
func (r *Reconciler) forgetTrust(key types.NamespacedName) {
	r.trustMu.Lock()
	defer r.trustMu.Unlock()
	delete(r.trustChecked, key.String())
}
