package agent_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/yaml"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/contract/memberlease"
	"github.com/etcd-conductor/etcd-conductor/internal/contract/snapshot"
	"github.com/etcd-conductor/etcd-conductor/internal/member/agent"
	"github.com/etcd-conductor/etcd-conductor/internal/member/datadir"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/etcdstatus"
	"github.com/etcd-conductor/etcd-conductor/internal/store/backupstore"
	"github.com/etcd-conductor/etcd-conductor/test/brfixture"
	"github.com/etcd-conductor/etcd-conductor/test/framework"
	"github.com/etcd-conductor/etcd-conductor/test/localcluster"
)

// TestInitBootstrapsFromTheBackup runs the init step of a new cluster's member against a real
// apiserver and a Local store:
//   - the store holds etcd-backup-restore's chain (a copied etcd-druid bucket): the member does
//     not bootstrap but reports wait/bootstrap-from-backup with its empty data dir for its pod;
//     ordered by the operator (status.recovery, its pod UID, a token) it restores the chain and
//     starts as a new single-member cluster under the order's token;
//   - the store is empty: it bootstraps as before, at once;
//   - the store cannot be reached: it neither bootstraps nor restores, and says why.
func TestInitBootstrapsFromTheBackup(t *testing.T) {
	cluster := localcluster.StartForTest(t, localcluster.Options{NoControllerManager: true, CRDs: true})
	c := cluster.Client()
	leases := cluster.Clientset().CoordinationV1()
	if _, err := framework.CreateNamespace(context.Background(), c, namespace, nil); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		fixture string
		// openErr makes the store unreachable.
		openErr   error
		wantRule  string
		wantOrder bool
	}{
		{name: "store holds a backup", fixture: brfixture.Gzip, wantRule: agent.StartRuleBootstrapFromBackup, wantOrder: true},
		{name: "empty store", wantRule: agent.StartRuleBootstrap},
		{name: "store unreachable", openErr: errors.New("dial tcp 10.0.0.1:443: connection refused"), wantRule: agent.StartRuleBackupUnknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			name := "boot-" + strings.ReplaceAll(tc.name, " ", "-")
			member := name + "-0"
			etcd := framework.NewEtcd(namespace, name, 1, "etcd")
			if err := c.Create(ctx, etcd); err != nil {
				t.Fatal(err)
			}
			lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: member}}
			if err := controllerutil.SetControllerReference(etcd, lease, c.Scheme()); err != nil {
				t.Fatal(err)
			}
			if err := c.Create(ctx, lease); err != nil {
				t.Fatal(err)
			}
			root := t.TempDir()
			store, err := backupstore.NewLocal(filepath.Join(root, "store"), "backups", name)
			if err != nil {
				t.Fatal(err)
			}
			if tc.fixture != "" {
				if _, err := brfixture.Put(ctx, store, tc.fixture); err != nil {
					t.Fatal(err)
				}
			}
			dataDir := filepath.Join(root, "new.etcd")
			configFile := filepath.Join(root, "etcd.conf.yaml")
			peer := "https://" + member + ".peer.agents.svc:2380"
			init, err := agent.NewInitializer(agent.InitConfig{
				ConfigFile:  configFile,
				ClientPort:  1,
				ClientFiles: agent.ClientFiles{CAFile: filepath.Join(root, "missing-ca.crt"), CertFile: filepath.Join(root, "missing.crt"), KeyFile: filepath.Join(root, "missing.key")},
				Lease:       member, Namespace: namespace, PodUID: "uid-0",
				PollInterval: 50 * time.Millisecond,
				EtcdFlags: []string{"--name=" + member, "--data-dir=" + dataDir, "--initial-advertise-peer-urls=" + peer,
					"--initial-cluster=" + member + "=" + peer, "--initial-cluster-state=new"},
				BackupStore: func(context.Context) (backupstore.Store, error) {
					if tc.openErr != nil {
						return nil, tc.openErr
					}
					return store, nil
				},
				BackupOwner: snapshot.Owner{Etcd: namespace + "/" + name, EtcdUID: string(etcd.UID)},
			}, leases, c, testr.New(t))
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- init.Run(ctx) }()

			// The first report of a decision on the data dir.
			var report memberlease.StartReport
			for {
				l := getLease(t, leases, member)
				var ok bool
				if report, ok = memberlease.ParseStartReport(l.Annotations); ok {
					t.Logf("%s", l.Annotations[memberlease.AnnotationStartDecision])
					break
				}
				if ctx.Err() != nil {
					t.Fatalf("no start report on the Lease: %v", l.Annotations)
				}
				time.Sleep(50 * time.Millisecond)
			}
			if report.Rule != tc.wantRule || report.Data != memberlease.DataEmpty || report.PodUID != "uid-0" {
				t.Fatalf("start report %+v, want rule %s on an Empty data dir of pod uid-0", report, tc.wantRule)
			}
			switch {
			case tc.wantOrder:
				// The member waits: nothing is written until the operator orders.
				time.Sleep(300 * time.Millisecond)
				if _, err := os.Stat(configFile); err == nil {
					t.Fatal("the member wrote its etcd configuration before it was ordered to restore")
				}
				fresh := &druidv1alpha1.Etcd{}
				if err := c.Get(ctx, client.ObjectKeyFromObject(etcd), fresh); err != nil {
					t.Fatal(err)
				}
				if err := etcdstatus.Patch(ctx, c, fresh, etcdstatus.WriterRecovery, func(s *druidv1alpha1.EtcdStatus) {
					s.Recovery = &druidv1alpha1.RecoveryRequest{Member: member, PodUID: "uid-0", Token: "bootstrapped-1", Reason: "test"}
				}); err != nil {
					t.Fatal(err)
				}
				if err := <-done; err != nil {
					t.Fatalf("init step: %v", err)
				}
				cfg := readConfig(t, configFile)
				if cfg["initial-cluster-state"] != "new" || cfg["initial-cluster-token"] != "bootstrapped-1" || cfg["initial-cluster"] != member+"="+peer {
					t.Errorf("etcd configuration %v, want a new single-member cluster under the order's token", cfg)
				}
				if r, err := datadir.Inspect(dataDir); err != nil || r.State != datadir.Valid {
					t.Errorf("data dir after the restore: %+v, %v; want Valid", r, err)
				}
				if d := getLease(t, leases, member).Annotations[memberlease.AnnotationStartDecision]; !strings.Contains(d, "revision 59 of 59") {
					t.Errorf("start decision %q does not report the restore to the chain's end (revision 59)", d)
				}
			case tc.wantRule == agent.StartRuleBootstrap:
				if err := <-done; err != nil {
					t.Fatalf("init step: %v", err)
				}
				cfg := readConfig(t, configFile)
				if cfg["initial-cluster-state"] != "new" || cfg["initial-cluster-token"] != nil {
					t.Errorf("etcd configuration %v, want a plain bootstrap", cfg)
				}
			default:
				cancel()
				if err := <-done; !errors.Is(err, context.Canceled) {
					t.Fatalf("init step ended with %v, want it still waiting", err)
				}
				if _, err := os.Stat(configFile); err == nil {
					t.Fatal("the member wrote its etcd configuration though it could not ask its store")
				}
			}
		})
	}
}

func readConfig(t *testing.T, path string) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg := map[string]any{}
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	return cfg
}
