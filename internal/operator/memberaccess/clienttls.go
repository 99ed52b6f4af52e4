package memberaccess

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-conductor/etcd-conductor/etcdclient"
	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/transport"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
	conductortls "github.com/etcd-conductor/etcd-conductor/tls"
)

// ClientTLS returns the client key pair to dial etcd's members with: the Etcd's own
// (clientUrlTls.clientTLSSecretRef, with the CA of tlsCASecretRef) when it names one, else the
// operator-wide one (an error when there is none); plaintext material for an Etcd without
// clientUrlTls. The Secrets are read through the Secret cache:
// this is for the controllers that ask the members on every poll, and they call ForgetSecrets
// when the members do not answer, so a rotated key pair is read again at once.
func (a *Access) ClientTLS(ctx context.Context, etcd *druidv1alpha1.Etcd) (conductortls.ClientMaterial, error) {
	if a.secrets == nil {
		return a.clientTLS(ctx, a.reader, etcd)
	}
	return a.clientTLS(ctx, a.secrets, etcd)
}

// FreshClientTLS is ClientTLS with the Secrets read from the apiserver now, for the controllers
// that reach the members seldom (a defragmentation step, the quota check) or whose members not
// answering says nothing about the key pair (recovery, while quorum is lost): they could not tell
// when to forget a cached one.
func (a *Access) FreshClientTLS(ctx context.Context, etcd *druidv1alpha1.Etcd) (conductortls.ClientMaterial, error) {
	return a.clientTLS(ctx, a.reader, etcd)
}

// ForgetSecrets drops the Secrets etcd's key pair was read from, so that the next ClientTLS
// reads them again: the members refusing it or not answering at all is what a rotated key pair
// or CA looks like.
func (a *Access) ForgetSecrets(etcd *druidv1alpha1.Etcd) {
	if a.secrets != nil {
		a.secrets.Forget(etcd)
	}
}

// ForgetSecretsOnRefusal is ForgetSecrets when a member of cs refused the TLS handshake while
// others answer, on connections opened before: a renewed certificate or a new CA, which a
// caller holding the cached material would otherwise go on failing on until the cache expires.
func (a *Access) ForgetSecretsOnRefusal(etcd *druidv1alpha1.Etcd, cs etcdclient.ClusterStatus) {
	if cs.TLSRefused() {
		a.ForgetSecrets(etcd)
	}
}

func (a *Access) clientTLS(ctx context.Context, reader client.Reader, etcd *druidv1alpha1.Etcd) (conductortls.ClientMaterial, error) {
	t := etcd.Spec.Etcd.ClientUrlTLS
	if t == nil || !a.clientsOnTLS(ctx, etcd) {
		// The members serve clients on plain HTTP: no client TLS, or not on TLS only yet. While
		// TLS is being added every member serves http too, so this reaches all of them.
		return conductortls.PlaintextMaterial(), nil
	}
	if t.ClientTLSSecretRef.Name == "" {
		if a.defaultTLS == nil {
			return conductortls.ClientMaterial{}, errors.New("Etcd names no clientUrlTls.clientTLSSecretRef and the operator has no memberClientTLS configured")
		}
		// Not kept: it is read from files mounted into the manager pod on every use, so a
		// rotated Secret behind them is picked up without a restart.
		return a.defaultTLS()
	}
	// What the members mount: its CA bundle trusts every member's certificate and every member
	// trusts its client certificate, also in the middle of a rotation (internal/decide/trustchange).
	held, err := secret(ctx, reader, etcd.Namespace, resources.MemberTLSSecretName(etcd))
	switch {
	case err == nil && metav1.IsControlledBy(held, etcd):
		ca, caKey, pair := resources.MemberClientTLSSecrets(held)
		return a.built.get(etcd.Namespace, ca, caKey, pair)
	case err != nil && !apierrors.IsNotFound(err):
		return conductortls.ClientMaterial{}, err
	}
	// None yet (the members of an older release mount the Etcd's Secrets).
	caSecret, err := secret(ctx, reader, etcd.Namespace, t.TLSCASecretRef.Name)
	if err != nil {
		return conductortls.ClientMaterial{}, err
	}
	clientSecret, err := secret(ctx, reader, etcd.Namespace, t.ClientTLSSecretRef.Name)
	if err != nil {
		return conductortls.ClientMaterial{}, err
	}
	return a.built.get(etcd.Namespace, caSecret, resources.CADataKey(t.TLSCASecretRef), clientSecret)
}

// clientsOnTLS tells whether the Etcd's members serve clients on TLS only: the StatefulSet's
// template renders that stage, or there is no StatefulSet yet (its members will start on TLS).
// A read error counts as TLS, the spec's answer, so the caller's dial fails and says why rather
// than talking plaintext on a guess.
func (a *Access) clientsOnTLS(ctx context.Context, etcd *druidv1alpha1.Etcd) bool {
	if a.sets == nil {
		return true
	}
	sts := &appsv1.StatefulSet{}
	if err := a.sets.Get(ctx, types.NamespacedName{Namespace: etcd.Namespace, Name: resources.StatefulSetName(etcd)}, sts); err != nil {
		return true
	}
	stages, ok := resources.RunningTransport(sts)
	return !ok || stages.Client == transport.TLS
}

func secret(ctx context.Context, reader client.Reader, namespace, name string) (*corev1.Secret, error) {
	s := &corev1.Secret{}
	if err := reader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, s); err != nil {
		return nil, fmt.Errorf("reading Secret %s/%s: %w", namespace, name, err)
	}
	return s, nil
}

// builtIdle is how long a key pair is kept without being asked for. A live Etcd's is asked for
// every few seconds; this drops those of Etcds since deleted and those their Secrets' rotation
// replaced.
const builtIdle = time.Hour

// builtMaterials keeps the key pairs built from Secrets, by what they were built from. Building
// verifies the pair and its chain to the CA, which parses every certificate; the same Secrets at
// the same resourceVersions build the same key pair, so each Etcd's is built once, and again
// only when its Secrets or the Etcd's references to them change, or when one of its
// certificates expires, since building would then fail and say so.
type builtMaterials struct {
	build func(caSecret *corev1.Secret, caDataKey string, clientSecret *corev1.Secret) (conductortls.ClientMaterial, error)
	now   func() time.Time

	mu   sync.Mutex
	kept map[materialSource]builtMaterial
}

type builtMaterial struct {
	material   conductortls.ClientMaterial
	validUntil time.Time
	usedAt     time.Time
}

// materialSource is what a key pair was built from: the Secrets the Etcd names, at the
// resourceVersions read, and the CA's data key. A rotation, or the Etcd naming other Secrets or
// another key, is another source. The controllers that read the Secrets fresh and those that
// read them through the Secret cache may see two editions for a while: each has its own entry.
type materialSource struct {
	namespace                      string
	caSecret, caVersion, caDataKey string
	clientSecret, clientVersion    string
}

func newBuiltMaterials(build func(*corev1.Secret, string, *corev1.Secret) (conductortls.ClientMaterial, error)) *builtMaterials {
	return &builtMaterials{build: build, now: time.Now, kept: map[materialSource]builtMaterial{}}
}

// get returns the key pair the Secrets make, built only the first time they are seen at these
// resourceVersions. Only a key pair that built is kept: a broken one fails again, with its
// error, on every use.
func (b *builtMaterials) get(namespace string, caSecret *corev1.Secret, caDataKey string, clientSecret *corev1.Secret) (conductortls.ClientMaterial, error) {
	from := materialSource{namespace: namespace,
		caSecret: caSecret.Name, caVersion: caSecret.ResourceVersion, caDataKey: caDataKey,
		clientSecret: clientSecret.Name, clientVersion: clientSecret.ResourceVersion}
	// A Secret without a resourceVersion (a test's reader may hand one out) cannot be told apart
	// from its next edition.
	versioned := from.caVersion != "" && from.clientVersion != ""
	if versioned {
		if m, ok := b.lookup(from); ok {
			return m, nil
		}
	}
	m, err := b.build(caSecret, caDataKey, clientSecret)
	if err != nil || !versioned {
		return m, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	for k, v := range b.kept {
		if now.Sub(v.usedAt) >= builtIdle || !now.Before(v.validUntil) {
			delete(b.kept, k)
		}
	}
	b.kept[from] = builtMaterial{material: cloneMaterial(m), validUntil: m.ValidUntil(), usedAt: now}
	return m, nil
}

func (b *builtMaterials) lookup(from materialSource) (conductortls.ClientMaterial, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	hit, found := b.kept[from]
	now := b.now()
	if !found || !now.Before(hit.validUntil) {
		return conductortls.ClientMaterial{}, false
	}
	hit.usedAt = now
	b.kept[from] = hit
	return cloneMaterial(hit.material), true
}

// cloneMaterial copies m, so that what a caller does with its copy never reaches the one kept.
func cloneMaterial(m conductortls.ClientMaterial) conductortls.ClientMaterial {
	return conductortls.ClientMaterial{CA: bytes.Clone(m.CA), Cert: bytes.Clone(m.Cert), Key: bytes.Clone(m.Key)}
}
