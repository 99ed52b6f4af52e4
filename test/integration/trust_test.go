package integration

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/trustchange"
	"github.com/etcd-conductor/etcd-conductor/test/framework"
	"github.com/etcd-conductor/etcd-conductor/tls/testpki"
)

// TestRenewedKeyWrittenBeforeItsCertificateIsHeldBack: the user renews the serving pair in two
// steps, the certificate first (its key still the old one), then the key. The first write is held
// back (the member TLS Secret keeps the pair in use) with a Warning naming the Secret and the
// failed check and the TrustChange condition saying so; once the key is written too the pair is
// copied. The members' pods do not run here: the StatefulSet's status is written as its
// controller would once every pod runs the template.
func TestRenewedKeyWrittenBeforeItsCertificateIsHeldBack(t *testing.T) {
	env := sharedControlPlane(t)
	ns := testNamespace("trust-hold")
	ctx := context.Background()
	if _, err := framework.CreateNamespace(ctx, env.Client(), ns, nil); err != nil {
		t.Fatal(err)
	}
	pki, err := framework.CreateTLSSecrets(ctx, env.Client(), ns, "etcd-main")
	if err != nil {
		t.Fatal(err)
	}
	framework.StartOperator(t, env.RESTConfig(), framework.OperatorOptions{FeatureGates: gate(true), WatchNamespaces: []string{ns}, TrustRecheck: time.Second})
	etcd := framework.NewEtcd(ns, "etcd-main", 3, framework.EtcdImage("3.6.8"))
	if err := env.Client().Create(ctx, etcd); err != nil {
		t.Fatal(err)
	}
	memberTLS := types.NamespacedName{Namespace: ns, Name: "etcd-main-member-tls"}
	served := func(ctx context.Context) ([]byte, error) {
		s := &corev1.Secret{}
		if err := env.Client().Get(ctx, memberTLS, s); err != nil {
			return nil, err
		}
		return s.Data["server.crt"], nil
	}
	framework.Eventually(t, timeout, "the member TLS Secret", func(ctx context.Context) (bool, string) {
		got, err := served(ctx)
		if err != nil {
			return false, err.Error()
		}
		return bytes.Equal(got, pki.Server.CertPEM), "not the serving certificate"
	})
	// Every member runs the current template, as the StatefulSet controller would count it.
	framework.Eventually(t, timeout, "the StatefulSet's status", func(ctx context.Context) (bool, string) {
		sts := &appsv1.StatefulSet{}
		if err := env.Client().Get(ctx, types.NamespacedName{Namespace: ns, Name: "etcd-main"}, sts); err != nil {
			return false, err.Error()
		}
		n := ptr.Deref(sts.Spec.Replicas, 0)
		sts.Status.ObservedGeneration, sts.Status.Replicas, sts.Status.UpdatedReplicas = sts.Generation, n, n
		if err := env.Client().Status().Update(ctx, sts); err != nil {
			return false, err.Error()
		}
		return true, ""
	})

	renewed, err := pki.CA.ServerCert("etcd-main-server", testpki.MemberServerDNSNames("etcd-main", ns), testpki.MemberServerIPs())
	if err != nil {
		t.Fatal(err)
	}
	secret := types.NamespacedName{Namespace: ns, Name: "etcd-main-server-tls"}
	write := func(cert, key []byte) {
		s := &corev1.Secret{}
		if err := env.Client().Get(ctx, secret, s); err != nil {
			t.Fatal(err)
		}
		s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey] = cert, key
		if err := env.Client().Update(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	// Without pods nothing else wakes the Etcd's reconciler, and Secrets are not watched: an
	// annotation of the Etcd does, as a pod's change would.
	pokes := 0
	poke := func(ctx context.Context) {
		pokes++
		p := client.MergeFrom(etcd.DeepCopy())
		metav1.SetMetaDataAnnotation(&etcd.ObjectMeta, "test.etcd-conductor.io/poke", fmt.Sprint(pokes))
		if err := env.Client().Patch(ctx, etcd, p); err != nil {
			t.Logf("poking the Etcd: %v", err)
		}
	}
	write(renewed.CertPEM, pki.Server.KeyPEM) // the certificate first
	framework.Eventually(t, timeout, "the TrustChange condition", func(ctx context.Context) (bool, string) {
		poke(ctx)
		got := &druidv1alpha1.Etcd{}
		if err := env.Client().Get(ctx, client.ObjectKeyFromObject(etcd), got); err != nil {
			return false, err.Error()
		}
		c := druidv1alpha1.FindCondition(got.Status.Conditions, druidv1alpha1.ConditionTypeTrustChange)
		if c == nil || c.Status != druidv1alpha1.ConditionTrue || c.Reason != trustchange.RuleHoldUnfit.CamelCase() || !strings.Contains(c.Message, trustchange.CheckKeyMatch) {
			return false, fmt.Sprintf("condition %+v", c)
		}
		return true, ""
	})
	waitForEvent(t, env.Client(), etcd, trustchange.RuleHoldUnfit.CamelCase(), "etcd-main-server-tls", trustchange.CheckKeyMatch)
	// Held back: the members keep serving the pair in use, read after a few more periods.
	for range 3 {
		poke(ctx)
		time.Sleep(time.Second)
	}
	if got, err := served(ctx); err != nil || !bytes.Equal(got, pki.Server.CertPEM) {
		t.Fatalf("the member TLS Secret holds another serving certificate than the one in use (%v): a certificate with another pair's key was copied", err)
	}

	write(renewed.CertPEM, renewed.KeyPEM) // then its key
	framework.Eventually(t, timeout, "the renewed pair copied", func(ctx context.Context) (bool, string) {
		poke(ctx)
		got, err := served(ctx)
		if err != nil {
			return false, err.Error()
		}
		return bytes.Equal(got, renewed.CertPEM), "not the renewed certificate yet"
	})
}
