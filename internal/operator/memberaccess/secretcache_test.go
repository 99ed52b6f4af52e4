package memberaccess

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
)

// countingReader serves one Secret whose data changes with every read, and counts the reads.
type countingReader struct{ gets int }

func (r *countingReader) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	r.gets++
	s := obj.(*corev1.Secret)
	s.Name, s.Namespace = key.Name, key.Namespace
	s.Data = map[string][]byte{"tls.crt": []byte{byte(r.gets)}}
	return nil
}

func (r *countingReader) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return nil
}

func TestSecretCache(t *testing.T) {
	reader := &countingReader{}
	cache := newSecretCache(reader, time.Minute)
	now := time.Unix(1000, 0)
	cache.now = func() time.Time { return now }
	etcd := &druidv1alpha1.Etcd{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "e"}}
	etcd.Spec.Etcd.ClientUrlTLS = &druidv1alpha1.TLSConfig{}
	etcd.Spec.Etcd.ClientUrlTLS.TLSCASecretRef.Name = "ca"
	etcd.Spec.Etcd.ClientUrlTLS.ClientTLSSecretRef.Name = "client"
	key := client.ObjectKey{Namespace: "ns", Name: "client"}

	get := func() byte {
		t.Helper()
		s := &corev1.Secret{}
		if err := cache.Get(t.Context(), key, s); err != nil {
			t.Fatal(err)
		}
		return s.Data["tls.crt"][0]
	}
	steps := []struct {
		name     string
		before   func()
		wantRead int
		wantData byte
	}{
		{"first use reads", func() {}, 1, 1},
		{"within the TTL the copy is used", func() { now = now.Add(30 * time.Second) }, 1, 1},
		{"after the TTL it is read again", func() { now = now.Add(31 * time.Second) }, 2, 2},
		{"forgotten (members refused it) it is read again", func() { cache.Forget(etcd) }, 3, 3},
	}
	for _, s := range steps {
		s.before()
		if got := get(); got != s.wantData || reader.gets != s.wantRead {
			t.Errorf("%s: data %d after %d reads, want %d after %d", s.name, got, reader.gets, s.wantData, s.wantRead)
		}
	}
	// A copy handed out is the caller's: changing it leaves the cache alone.
	s := &corev1.Secret{}
	_ = cache.Get(t.Context(), key, s)
	s.Data["tls.crt"][0] = 99
	if got := get(); got != 3 {
		t.Errorf("cache changed through a returned copy: %d", got)
	}
}
