package memberaccess

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
)

// secretCache is a client.Reader that remembers the Secrets it was asked for by name, for at
// most a TTL, and reads everything else through.
//
// The operator may only get Secrets (least privilege: no list, no watch, so no informer holding
// every Secret in reach), so it cannot learn cheaply that one changed. Reading an Etcd's client
// key pair on every member query would cost two GETs per Etcd every poll, the whole fleet over,
// at every manager restart. Instead a Secret read is kept for the TTL, and forgotten at once
// when the members refuse or cannot be reached with it (Access.ForgetSecrets): a rotated key
// pair or CA is then read again on the next reconcile. Only the Secrets Etcds name are held,
// never a list.
type secretCache struct {
	reader client.Reader
	ttl    time.Duration
	now    func() time.Time

	mu      sync.Mutex
	secrets map[types.NamespacedName]cachedSecret
}

type cachedSecret struct {
	secret *corev1.Secret
	readAt time.Time
}

// newSecretCache wraps reader (the manager's uncached APIReader).
func newSecretCache(reader client.Reader, ttl time.Duration) *secretCache {
	return &secretCache{reader: reader, ttl: ttl, now: time.Now, secrets: map[types.NamespacedName]cachedSecret{}}
}

var _ client.Reader = &secretCache{}

// Get returns a Secret from the cache while it is younger than the TTL, else reads and keeps it;
// any other object is read through.
func (c *secretCache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	secret, ok := obj.(*corev1.Secret)
	if !ok {
		return c.reader.Get(ctx, key, obj, opts...)
	}
	c.mu.Lock()
	hit, found := c.secrets[key]
	c.mu.Unlock()
	if found && c.now().Sub(hit.readAt) < c.ttl {
		hit.secret.DeepCopyInto(secret)
		return nil
	}
	if err := c.reader.Get(ctx, key, secret, opts...); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	// Expired entries go here, so Secrets of Etcds since deleted are not held for ever.
	for k, v := range c.secrets {
		if now.Sub(v.readAt) >= c.ttl {
			delete(c.secrets, k)
		}
	}
	c.secrets[key] = cachedSecret{secret: secret.DeepCopy(), readAt: now}
	return nil
}

// List reads through: Secrets are never listed.
func (c *secretCache) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return c.reader.List(ctx, list, opts...)
}

// Forget drops the Secrets etcd's member client key pair comes from, so the next use reads them
// again.
func (c *secretCache) Forget(etcd *druidv1alpha1.Etcd) {
	t := etcd.Spec.Etcd.ClientUrlTLS
	if t == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, name := range []string{resources.MemberTLSSecretName(etcd), t.TLSCASecretRef.Name, t.ClientTLSSecretRef.Name} {
		delete(c.secrets, types.NamespacedName{Namespace: etcd.Namespace, Name: name})
	}
}
