package memberaccess

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/trustchange"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
	conductortls "github.com/etcd-conductor/etcd-conductor/tls"
	"github.com/etcd-conductor/etcd-conductor/tls/testpki"
)

// secretStore serves the Secrets it holds by name, as the apiserver would, and counts the reads.
type secretStore struct {
	secrets map[string]*corev1.Secret
	gets    int
}

func (s *secretStore) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	s.gets++
	held, ok := s.secrets[key.Name]
	if !ok || key.Namespace != held.Namespace {
		return apierrors.NewNotFound(corev1.Resource("secrets"), key.Name)
	}
	held.DeepCopyInto(obj.(*corev1.Secret))
	return nil
}

func (s *secretStore) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return errors.New("Secrets are never listed")
}

// put stores secret at resourceVersion version.
func (s *secretStore) put(secret *corev1.Secret, version string) {
	secret.ResourceVersion = version
	s.secrets[secret.Name] = secret
}

func etcdNaming(clientSecret string) *druidv1alpha1.Etcd {
	etcd := testEtcd()
	etcd.Spec.Etcd.ClientUrlTLS = &druidv1alpha1.TLSConfig{}
	etcd.Spec.Etcd.ClientUrlTLS.TLSCASecretRef.Name = "ca"
	etcd.Spec.Etcd.ClientUrlTLS.ClientTLSSecretRef.Name = clientSecret
	return etcd
}

// countBuilds counts the key pairs a builds from then on.
func countBuilds(a *Access) *int {
	builds := 0
	build := a.built.build
	a.built.build = func(ca *corev1.Secret, caKey string, c *corev1.Secret) (conductortls.ClientMaterial, error) {
		builds++
		return build(ca, caKey, c)
	}
	return &builds
}

func newPKI(t *testing.T) *testpki.EtcdPKI {
	t.Helper()
	pki, err := testpki.NewEtcdPKI("etcd-main", ns)
	if err != nil {
		t.Fatal(err)
	}
	return pki
}

// TestClientTLSBuildsOncePerSource: a key pair is built once for the Secrets at the versions
// read, and again when a Secret changes or the Etcd names another; the Secrets themselves are
// read as each path says (ClientTLS through the cache, FreshClientTLS every time).
func TestClientTLSBuildsOncePerSource(t *testing.T) {
	pki := newPKI(t)
	// cert-manager renews the client certificate from the same CA.
	renewed, err := pki.CA.ClientCert("etcd-main-client")
	if err != nil {
		t.Fatal(err)
	}
	renewedMaterial := pki.CA.ClientMaterial(renewed)
	store := &secretStore{secrets: map[string]*corev1.Secret{}}
	store.put(pki.CA.Secret(ns, "ca"), "1")
	store.put(testpki.TLSSecret(ns, "client", pki.CA, pki.Client), "1")
	store.put(testpki.TLSSecret(ns, "other-client", pki.CA, pki.Client), "1")
	store.put(memberTLSSecret(pki.CA, pki.Client), "1")
	a := New(Config{Reader: store, SecretTTL: time.Minute})
	builds := countBuilds(a)
	etcd := etcdNaming("client")

	steps := []struct {
		name       string
		before     func()
		get        func(context.Context, *druidv1alpha1.Etcd) (conductortls.ClientMaterial, error)
		wantReads  int
		wantBuilds int
		want       conductortls.ClientMaterial
	}{
		{"first use reads and builds", func() {}, a.ClientTLS, 1, 1, pki.ClientMaterial()},
		{"the cached Secret: nothing read, nothing built", func() {}, a.ClientTLS, 1, 1, pki.ClientMaterial()},
		{"read fresh, unchanged: nothing built", func() {}, a.FreshClientTLS, 2, 1, pki.ClientMaterial()},
		{"renewed, read fresh: built", func() { store.put(memberTLSSecret(pki.CA, renewed), "2") },
			a.FreshClientTLS, 3, 2, renewedMaterial},
		{"renewed, the cached edition: its own key pair, not built again", func() {}, a.ClientTLS, 3, 2, pki.ClientMaterial()},
		{"forgotten, the cached path reads the renewal: not built again", func() { a.ForgetSecrets(etcd) }, a.ClientTLS, 4, 2,
			renewedMaterial},
		// An Etcd of an older release: its members mount its own Secrets, and so does the operator.
		{"no member TLS Secret: the Etcd's own, built", func() { delete(store.secrets, resources.MemberTLSSecretName(etcd)); a.ForgetSecrets(etcd) }, a.ClientTLS, 7, 3, pki.ClientMaterial()},
		{"the Etcd names another Secret: built", func() { etcd = etcdNaming("other-client") }, a.ClientTLS, 9, 4, pki.ClientMaterial()},
	}
	for _, s := range steps {
		s.before()
		got, err := s.get(t.Context(), etcd)
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if store.gets != s.wantReads || *builds != s.wantBuilds {
			t.Errorf("%s: %d reads and %d builds, want %d and %d", s.name, store.gets, *builds, s.wantReads, s.wantBuilds)
		}
		if got.Fingerprint() != s.want.Fingerprint() {
			t.Errorf("%s: another key pair than expected", s.name)
		}
	}
}

// memberTLSSecret is the member TLS Secret of testEtcd's Etcd with the client key pair kp.
func memberTLSSecret(ca *testpki.CA, kp testpki.KeyPair) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: resources.MemberTLSSecretName(testEtcd()), Namespace: ns,
		OwnerReferences: []metav1.OwnerReference{{Kind: "Etcd", Name: "etcd-main", UID: testEtcd().UID, Controller: ptr.To(true)}}},
		Data: resources.MemberTLSData(trustchange.Material{ClientCA: ca.CertPEM, Client: trustchange.Pair{Cert: kp.CertPEM, Key: kp.KeyPEM}})}
	return s
}

// TestClientTLSPrecedence: the Etcd's own key pair when it names one, else the operator-wide
// one, else an error; plaintext material for an Etcd without clientUrlTls, whose members serve
// plain HTTP, whatever the operator has.
func TestClientTLSPrecedence(t *testing.T) {
	pki, operatorWide, held := newPKI(t), newPKI(t), newPKI(t)
	store := &secretStore{secrets: map[string]*corev1.Secret{}}
	store.put(pki.CA.Secret(ns, "ca"), "1")
	store.put(testpki.TLSSecret(ns, "client", pki.CA, pki.Client), "1")
	loadDefault := func() (conductortls.ClientMaterial, error) { return operatorWide.ClientMaterial(), nil }
	caOnly := etcdNaming("")
	for _, tc := range []struct {
		name       string
		etcd       *druidv1alpha1.Etcd
		defaultTLS func() (conductortls.ClientMaterial, error)
		want       conductortls.ClientMaterial
		wantErr    string
	}{
		{"what the members mount over the Etcd's own", etcdNaming("client"), loadDefault, held.ClientMaterial(), ""},
		{"the Etcd's own over the operator's", etcdNaming("client"), loadDefault, pki.ClientMaterial(), ""},
		{"the Etcd's own without an operator's", etcdNaming("client"), nil, pki.ClientMaterial(), ""},
		{"plaintext when the Etcd has no client TLS", testEtcd(), loadDefault, conductortls.PlaintextMaterial(), ""},
		{"plaintext without an operator's either", testEtcd(), nil, conductortls.PlaintextMaterial(), ""},
		{"the operator's when the Etcd names a CA only", caOnly, loadDefault, operatorWide.ClientMaterial(), ""},
		{"none at all for a CA only", caOnly, nil, conductortls.ClientMaterial{}, "names no clientUrlTls.clientTLSSecretRef"},
		{"the Etcd's Secret missing: no fallback", etcdNaming("gone"), loadDefault, conductortls.ClientMaterial{}, "reading Secret shoot/gone"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			delete(store.secrets, resources.MemberTLSSecretName(tc.etcd))
			if tc.want.Fingerprint() == held.ClientMaterial().Fingerprint() {
				store.put(memberTLSSecret(held.CA, held.Client), "1")
			}
			a := New(Config{Reader: store, SecretTTL: time.Minute, DefaultClientTLS: tc.defaultTLS})
			for _, get := range []func(context.Context, *druidv1alpha1.Etcd) (conductortls.ClientMaterial, error){a.ClientTLS, a.FreshClientTLS} {
				got, err := get(t.Context(), tc.etcd)
				if tc.wantErr != "" {
					if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
						t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
					}
					continue
				}
				if err != nil {
					t.Fatal(err)
				}
				if got.Fingerprint() != tc.want.Fingerprint() {
					t.Errorf("another key pair than expected")
				}
			}
		})
	}
}

// TestClientTLSUnversionedSecretsAreBuiltEachTime: a Secret without a resourceVersion cannot be
// told apart from its next edition, so nothing is kept for it.
func TestClientTLSUnversionedSecretsAreBuiltEachTime(t *testing.T) {
	pki := newPKI(t)
	store := &secretStore{secrets: map[string]*corev1.Secret{}}
	store.put(pki.CA.Secret(ns, "ca"), "")
	store.put(testpki.TLSSecret(ns, "client", pki.CA, pki.Client), "")
	a := New(Config{Reader: store})
	builds := countBuilds(a)
	for i := 1; i <= 2; i++ {
		if _, err := a.ClientTLS(t.Context(), etcdNaming("client")); err != nil {
			t.Fatal(err)
		}
		// The member TLS Secret looked for (none: an Etcd of an older release), then the Etcd's.
		if *builds != i || store.gets != 3*i {
			t.Fatalf("use %d: %d builds and %d reads, want %d and %d", i, *builds, store.gets, i, 3*i)
		}
	}
}

// TestBuiltMaterialsDropIdle: a key pair nobody asked for within builtIdle (its Etcd deleted,
// its Secrets rotated) is dropped when another is built.
func TestBuiltMaterialsDropIdle(t *testing.T) {
	pki := newPKI(t)
	now := time.Unix(1000, 0)
	b := newBuiltMaterials(conductortls.FromSecrets)
	b.now = func() time.Time { return now }
	ca := pki.CA.Secret(ns, "ca")
	ca.ResourceVersion = "1"
	edition := func(name, version string) *corev1.Secret {
		s := testpki.TLSSecret(ns, name, pki.CA, pki.Client)
		s.ResourceVersion = version
		return s
	}
	for _, step := range []struct {
		name     string
		after    time.Duration
		use      *corev1.Secret
		wantKept []string
	}{
		{"the first kept", 0, edition("first", "1"), []string{"first@1"}},
		{"another kept next to it", builtIdle / 2, edition("second", "1"), []string{"first@1", "second@1"}},
		{"the first idle too long: dropped when the next is built", builtIdle / 2, edition("second", "2"), []string{"second@1", "second@2"}},
	} {
		t.Run(step.name, func(t *testing.T) {
			now = now.Add(step.after)
			if _, err := b.get(ns, ca, "ca.crt", step.use); err != nil {
				t.Fatal(err)
			}
			var kept []string
			for from := range b.kept {
				kept = append(kept, from.clientSecret+"@"+from.clientVersion)
			}
			slices.Sort(kept)
			if !slices.Equal(kept, step.wantKept) {
				t.Errorf("kept %v, want %v", kept, step.wantKept)
			}
		})
	}
}

// TestBuiltMaterialsExpire: a key pair is not handed out once a certificate in it has expired;
// it is built again, which fails then as building always did for an expired certificate.
func TestBuiltMaterialsExpire(t *testing.T) {
	pki := newPKI(t)
	shortLived, err := pki.CA.Issue(testpki.Request{CommonName: "etcd-main-client", Validity: 2 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	b := newBuiltMaterials(conductortls.FromSecrets)
	b.now = func() time.Time { return now }
	builds := 0
	b.build = func(ca *corev1.Secret, caKey string, c *corev1.Secret) (conductortls.ClientMaterial, error) {
		builds++
		return conductortls.FromSecrets(ca, caKey, c)
	}
	ca, client := pki.CA.Secret(ns, "ca"), testpki.TLSSecret(ns, "client", pki.CA, shortLived)
	ca.ResourceVersion, client.ResourceVersion = "1", "1"
	for _, step := range []struct {
		name       string
		after      time.Duration
		wantBuilds int
	}{
		{"first use builds", 0, 1},
		{"still valid: kept", 30 * time.Minute, 1},
		// The clock b goes by is past the expiry; the one x509 verifies against is not, so the
		// build succeeds here: what counts is that it happens.
		{"expired: built again", 2 * time.Hour, 2},
	} {
		t.Run(step.name, func(t *testing.T) {
			now = now.Add(step.after)
			if _, err := b.get(ns, ca, "ca.crt", client); err != nil {
				t.Fatal(err)
			}
			if builds != step.wantBuilds {
				t.Errorf("%d builds, want %d", builds, step.wantBuilds)
			}
		})
	}
}
