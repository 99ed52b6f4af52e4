package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/contract/snapshot"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
	"github.com/etcd-conductor/etcd-conductor/internal/store/backupstore"
	"github.com/etcd-conductor/etcd-conductor/test/framework"
	"github.com/etcd-conductor/etcd-conductor/test/s3server"
	conductortls "github.com/etcd-conductor/etcd-conductor/tls"
	"github.com/etcd-conductor/etcd-conductor/tls/testpki"
)

// TestDruidExamples: Etcds written as etcd-druid's published examples are (test/testdata/druid:
// every field those set) are accepted by kubectl's strict field validation, reach
// Ready with the default image, and serve audited, linearizable writes: the basic one with no TLS,
// image or store on plain HTTP (TLSEnabled False), one backing up to an S3 store (BackupReady
// True), one with client and peer TLS from Secrets with a CA dataKey of its own (TLSEnabled True).
// The three run side by side.
func TestDruidExamples(t *testing.T) {
	s := sharedStack(t)
	framework.StartOperator(t, s.Cluster.RESTConfig(), operatorDefaults)
	srv, err := s3server.New(s3server.Options{Host: s.Network.GatewayIP(), Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	if err := srv.CreateBucket(context.Background(), "etcd-backups"); err != nil {
		t.Fatal(err)
	}

	for _, tt := range []struct {
		file string
		// objects creates what the manifest names besides the Etcd; pki holds the cluster's
		// certificates (created by the stack under its default Secret names).
		objects  func(ctx context.Context, namespace string) error
		wantTLS  druidv1alpha1.ConditionStatus
		material func(pki *testpki.EtcdPKI) conductortls.ClientMaterial
		backups  bool
	}{
		{file: "example.yaml", wantTLS: druidv1alpha1.ConditionFalse, material: plaintext},
		{file: "example-s3.yaml", wantTLS: druidv1alpha1.ConditionFalse, material: plaintext, backups: true,
			objects: func(ctx context.Context, namespace string) error {
				return s.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "etcd-backup-s3"}, Data: srv.SecretData()})
			}},
		{file: "example-tls.yaml", wantTLS: druidv1alpha1.ConditionTrue, material: func(p *testpki.EtcdPKI) conductortls.ClientMaterial { return p.ClientMaterial() },
			objects: func(ctx context.Context, namespace string) error {
				return copyTLSSecrets(ctx, s.Client, namespace, "etcd-tls")
			}},
	} {
		t.Run(tt.file, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
			defer cancel()
			raw, err := os.ReadFile(filepath.Join("..", "testdata", "druid", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			manifest := &druidv1alpha1.Etcd{}
			if err := yaml.UnmarshalStrict(raw, manifest); err != nil {
				t.Fatalf("%s does not decode strictly into the Etcd type: %v", tt.file, err)
			}
			e := &env{t: t, stack: s}
			cluster := createClusterNamed(ctx, e, "e2e-druid-", manifest.Name, resources.DefaultEtcdImage, manifest.Spec.Replicas, func(ctx context.Context, namespace string, etcd *druidv1alpha1.Etcd) error {
				if err := strictDryRun(ctx, s.Client, namespace, raw); err != nil {
					t.Errorf("%s refused by strict field validation: %v", tt.file, err)
				}
				if tt.objects != nil {
					if err := tt.objects(ctx, namespace); err != nil {
						return err
					}
				}
				etcd.Name, etcd.Labels, etcd.Spec = manifest.Name, manifest.Labels, manifest.Spec
				return nil
			})
			material := tt.material(cluster.PKI)

			report := writeAWhile(ctx, t, cluster, material)
			t.Logf("%s: %s", tt.file, report.Summary())
			if tt.backups {
				// The writes reach the store: a gzip delta past them (the example compresses).
				store, err := backupstore.New(backupstore.Config{Provider: "S3", Container: *manifest.Spec.Backup.Store.Container,
					Prefix: manifest.Spec.Backup.Store.Prefix, Secret: srv.SecretData()})
				if err != nil {
					t.Fatal(err)
				}
				e.waitFor(ctx, "a gzip delta snapshot holding the writes", func(ctx context.Context) (bool, error) {
					objs, err := store.List(ctx, snapshot.Dir)
					if err != nil {
						return false, err
					}
					for _, o := range objs {
						snap, err := snapshot.Parse(o.Key)
						if err == nil && snap.Kind == snapshot.KindDelta && snap.Compression == snapshot.CompressionGzip && snap.EndRevision > int64(report.AckedWrites) {
							return true, nil
						}
					}
					return false, fmt.Errorf("%d objects, none a gzip delta past revision %d", len(objs), report.AckedWrites)
				})
				e.waitFor(ctx, "BackupReady True", backupReadyIs(cluster, druidv1alpha1.ConditionTrue))
			}

			etcd, err := cluster.Get(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if c := druidv1alpha1.FindCondition(etcd.Status.Conditions, druidv1alpha1.ConditionTypeTLSEnabled); c == nil || c.Status != tt.wantTLS {
				t.Errorf("TLSEnabled %+v, want %s", c, tt.wantTLS)
			}
			// Each member answers on its own, in the transport the manifest asks for.
			for _, ep := range cluster.Endpoints()() {
				kv := pb.NewKVClient(dialMember(t, ep, material.ConfigOrPlain))
				if _, err := kv.Range(ctx, &pb.RangeRequest{Key: []byte("probe")}); err != nil {
					t.Errorf("member %s: %v", ep.Name, err)
				}
			}
		})
	}
}

func plaintext(*testpki.EtcdPKI) conductortls.ClientMaterial { return conductortls.PlaintextMaterial() }

// strictDryRun creates the manifest as written, as `kubectl apply --validate=strict --dry-run=server`
// would: an unknown field is an error, not a dropped key.
func strictDryRun(ctx context.Context, c client.Client, namespace string, raw []byte) error {
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(raw, &u.Object); err != nil {
		return err
	}
	u.SetNamespace(namespace)
	return c.Create(ctx, u, client.DryRunAll, client.FieldValidation("Strict"))
}

// copyTLSSecrets stores the stack's PKI for etcdName under the Secret names example-tls.yaml uses, the CA
// under the dataKey bundle.crt as a CA bundle Secret would hold it.
func copyTLSSecrets(ctx context.Context, c client.Client, namespace, etcdName string) error {
	defaults := testpki.DefaultSecretNames(etcdName)
	for from, to := range map[string]string{
		defaults.Server: "etcd-tls-server", defaults.Client: "etcd-tls-client", defaults.Peer: "etcd-tls-peer",
	} {
		secret := &corev1.Secret{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: from}, secret); err != nil {
			return err
		}
		if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: to}, Type: secret.Type, Data: secret.Data}); err != nil {
			return err
		}
	}
	ca := &corev1.Secret{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: defaults.CA}, ca); err != nil {
		return err
	}
	return c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "etcd-tls-ca-bundle"},
		Data: map[string][]byte{"bundle.crt": ca.Data[conductortls.DefaultCADataKey]}})
}
