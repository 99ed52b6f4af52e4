package agent

import (
	"path/filepath"
	"testing"

	"go.etcd.io/etcd/server/v3/embed"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
)

// etcdConfigOf writes the configuration file a member of e starts with, from the ConfigMap's
// variables as the init step does, and reads it back with etcd's own loader: a key etcd does not
// know would be dropped there without an error, so each setting is checked on etcd's side.
func etcdConfigOf(t *testing.T, e *druidv1alpha1.Etcd) *embed.Config {
	t.Helper()
	cfg := InitConfig{Environment: resources.EtcdEnvironment(e), EtcdFlags: []string{"--name=" + e.Name + "-0"}}
	path := filepath.Join(t.TempDir(), "etcd.conf.yaml")
	if err := writeEtcdConfig(path, cfg.settings()); err != nil {
		t.Fatal(err)
	}
	loaded, err := embed.ConfigFromFile(path)
	if err != nil {
		t.Fatalf("etcd cannot load the configuration: %v", err)
	}
	return loaded
}

func druidSettingsEtcd(mutate func(e *druidv1alpha1.Etcd)) *druidv1alpha1.Etcd {
	ref := corev1.SecretReference{Name: "x"}
	tlsCfg := druidv1alpha1.TLSConfig{TLSCASecretRef: druidv1alpha1.SecretReference{SecretReference: ref}, ServerTLSSecretRef: ref, ClientTLSSecretRef: ref}
	e := &druidv1alpha1.Etcd{
		ObjectMeta: metav1.ObjectMeta{Name: "etcd-main", Namespace: "shoot"},
		Spec: druidv1alpha1.EtcdSpec{Replicas: 1, Etcd: druidv1alpha1.EtcdConfig{
			ClientUrlTLS: &tlsCfg, PeerUrlTLS: &druidv1alpha1.PeerTLSConfig{TLSConfig: tlsCfg},
		}},
	}
	mutate(e)
	return e
}

func TestEtcdReadsTheNewerDruidSettings(t *testing.T) {
	for _, tt := range []struct {
		name                  string
		mutate                func(e *druidv1alpha1.Etcd)
		gateway, skipSAN      bool
		freelist              string
		compaction, retention string
	}{
		{
			// etcd's own defaults (gateway on, map freelist); the SAN check skipped as always
			// here; etcd-druid's auto-compaction.
			name: "unset", mutate: func(*druidv1alpha1.Etcd) {},
			gateway: true, skipSAN: true, freelist: "", compaction: "periodic", retention: "30m",
		},
		{
			name: "set",
			mutate: func(e *druidv1alpha1.Etcd) {
				e.Spec.Etcd.EnableGRPCGateway = ptr.To(false)
				e.Spec.Etcd.BackendBboltFreelistType = ptr.To(druidv1alpha1.BboltFreelistArray)
				e.Spec.Etcd.PeerUrlTLS.SkipClientSANVerification = ptr.To(false)
				e.Spec.SharedConfig = &druidv1alpha1.SharedConfig{
					AutoCompactionMode: ptr.To(druidv1alpha1.CompactionRevision), AutoCompactionRetention: ptr.To("1000"),
				}
			},
			gateway: false, skipSAN: false, freelist: "array", compaction: "revision", retention: "1000",
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := etcdConfigOf(t, druidSettingsEtcd(tt.mutate))
			if got.EnableGRPCGateway != tt.gateway {
				t.Errorf("enable-grpc-gateway = %v, want %v", got.EnableGRPCGateway, tt.gateway)
			}
			if got.PeerTLSInfo.SkipClientSANVerify != tt.skipSAN {
				t.Errorf("peer skip-client-san-verification = %v, want %v", got.PeerTLSInfo.SkipClientSANVerify, tt.skipSAN)
			}
			if got.BackendFreelistType != tt.freelist {
				t.Errorf("backend-bbolt-freelist-type = %q, want %q", got.BackendFreelistType, tt.freelist)
			}
			if got.AutoCompactionMode != tt.compaction || got.AutoCompactionRetention != tt.retention {
				t.Errorf("auto-compaction = %q %q, want %q %q", got.AutoCompactionMode, got.AutoCompactionRetention, tt.compaction, tt.retention)
			}
		})
	}
}
