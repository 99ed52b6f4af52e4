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

// trustStepRecheck is how soon the TLS Secrets are read again while a change is carried out: each
// step waits on a rollout or on the kubelet.
const trustStepRecheck = 3 * time.Second

// defaultSecretPropagation bounds how long the kubelet takes to put a changed Secret into the
// files of the pods that mount it: its sync period (1 minute by default) plus the time to see the
// change. A CA leaves the members' trust only that long after the certificates it no longer signs
// were replaced.
const defaultSecretPropagation = 2 * time.Minute

// planTrust decides the TLS material the members mount (internal/decide/trustchange), writes it into the
// member TLS Secret when it changes, and returns the trust checksum for the pod template: a change
// of the CA bundles restarts the members, in the rollout's quorum-safe order, so that each one
// trusts them (etcd reads its CA files only at start).
//
// The Etcd's Secrets are read at most once a trustRecheck per Etcd (every trustStepRecheck while a
// change is under way), and not at the first reconcile after the operator started when the
// members mount the member TLS Secret already: a restart over a settled fleet then reads nothing
// (a change made meanwhile is seen one period later).
func (r *Reconciler) planTrust(ctx context.Context, etcd *druidv1alpha1.Etcd) (string, error) {
	if !resources.UsesTLS(etcd) {
		return "", nil
	}
	sts, err := r.runningStatefulSet(ctx, etcd)
	if err != nil {
		return "", err
	}
	running := ""
	if sts != nil {
		running = sts.Spec.Template.Annotations[resources.AnnotationTrustChecksum]
		if running != "" && resources.MountsMemberTLS(sts, etcd) && !r.trustDue(etcd) {
			return running, nil
		}
	}
	log := logr.FromContextOrDiscard(ctx)
	user, err := r.userTLSMaterial(ctx, etcd)
	if err != nil {
		if running == "" {
			return "", err
		}
		// The members run on what they mount; a Secret deleted or unreadable now changes nothing
		// (what uses it reports it) and must not stop the rest of the reconcile.
		log.Info("Cannot read the Etcd's TLS Secrets; the members' TLS material is left as it is", "error", err.Error())
		return running, nil
	}
	heldSecret, err := r.memberTLSSecret(ctx, etcd)
	if err != nil {
		return "", err
	}
	held := resources.MemberTLSMaterial(heldSecret)
	replicas := int(etcd.Spec.Replicas)
	if sts != nil {
		replicas = max(replicas, int(ptr.Deref(sts.Spec.Replicas, 0)))
	}
	d := trustchange.Plan(trustchange.Observed{
		User: user, Held: held,
		MembersTrustHeld: membersRunTrust(sts, etcd, resources.TrustChecksum(held)),
		CopiedSettled:    r.copiesSettled(heldSecret),
		Now:              time.Now(),
		Need:             resources.CertificateNeed(etcd, replicas),
		Secrets:          resources.CertificateSecrets(etcd),
	})
	if d.Write {
		if err := r.writeMemberTLS(ctx, etcd, heldSecret, d); err != nil {
			return "", err
		}
	}
	if d.Write || d.Waiting {
		r.trustSoon(etcd)
	}
	if d.Warning {
		log.Info("TLS material of the Etcd not used", "rule", d.Rule, "reason", d.Reason)
	}
	if err := r.recordTrust(ctx, etcd, d); err != nil {
		return "", err
	}
	return resources.TrustChecksum(d.Held), nil
}

// recordTrust sets the TrustChange condition from d once a change of the TLS material has been in
// view: True while one is made, waits or is held back, False once the members mount what the
// Secrets hold. The Event of each change of rule (recordChange) is a Warning for a pair held back,
// naming its Secret and the failed check. A new Etcd's first write is no change, unless what it
// mounts already fails a check.
func (r *Reconciler) recordTrust(ctx context.Context, etcd *druidv1alpha1.Etcd, d trustchange.Decision) error {
	inFlight := d.Write || d.Waiting || d.Warning
	if d.Rule == trustchange.RuleNew && !d.Warning {
		return nil
	}
	if !inFlight && druidv1alpha1.FindCondition(etcd.Status.Conditions, druidv1alpha1.ConditionTypeTrustChange) == nil {
		return nil
	}
	status := druidv1alpha1.ConditionFalse
	if inFlight {
		status = druidv1alpha1.ConditionTrue
	}
	return r.recordChange(ctx, etcd, druidv1alpha1.ConditionTypeTrustChange, status, d.Rule, d.Reason, d.Warning)
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
// trustStepRecheck (trustRequeue): a change is under way.
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
		return trustStepRecheck
	}
	return r.trustRecheck
}

// forgetTrust drops what trustDue noted for an Etcd that is gone.
func (r *Reconciler) forgetTrust(key types.NamespacedName) {
	r.trustMu.Lock()
	defer r.trustMu.Unlock()
	delete(r.trustChecked, key.String())
}
