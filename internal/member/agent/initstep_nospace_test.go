package agent_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/contract/memberlease"
	"github.com/etcd-conductor/etcd-conductor/internal/member/agent"
	"github.com/etcd-conductor/etcd-conductor/internal/member/restore"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/etcdstatus"
	"github.com/etcd-conductor/etcd-conductor/internal/store/backupstore"
	"github.com/etcd-conductor/etcd-conductor/test/framework"
	"github.com/etcd-conductor/etcd-conductor/test/localcluster"
)

// TestRestoreFailedTellsNoSpaceApart: a restore short of space gets its own rule and carries the
// numbers, however deep it is wrapped; any other failure stays restore/failed.
func TestRestoreFailedTellsNoSpaceApart(t *testing.T) {
	short := restore.CheckFreeSpace(t.TempDir(), 1<<62)
	if short == nil {
		t.Fatal("a volume with 4 EiB free")
	}
	tests := []struct {
		name     string
		err      error
		wantRule string
		noSpace  bool
	}{
		{"short of space", short, agent.StartRuleRestoreNoSpace, true},
		{"short of space, wrapped", fmt.Errorf("restoring the full snapshot: %w", short), agent.StartRuleRestoreNoSpace, true},
		{"a store that failed", fmt.Errorf("opening the backup store: %w", errors.New("connection refused")), agent.StartRuleRestoreFailed, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := agent.RestoreFailed(tt.err)
			if d.Rule != tt.wantRule || (d.NoSpace != nil) != tt.noSpace || !strings.Contains(d.Reason, tt.err.Error()) {
				t.Fatalf("decision %+v, want rule %s (numbers: %v) with the error", d, tt.wantRule, tt.noSpace)
			}
			if tt.noSpace && (d.NoSpace.Need != 1<<62 || d.NoSpace.Free <= 0 || d.NoSpace.Dir == "") {
				t.Errorf("numbers %+v", d.NoSpace)
			}
		})
	}
}

// TestInitReportsARestoreThatDoesNotFit runs the init step against a real apiserver, ordered to
// restore (status.recovery names its pod) while its volume cannot hold the restore: the Lease
// says restore/no-space, with the numbers in the start report the operator reads.
func TestInitReportsARestoreThatDoesNotFit(t *testing.T) {
	cluster := localcluster.StartForTest(t, localcluster.Options{NoControllerManager: true, CRDs: true})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := cluster.Client()
	if _, err := framework.CreateNamespace(ctx, c, namespace, nil); err != nil {
		t.Fatal(err)
	}
	etcd := framework.NewEtcd(namespace, "etcd-main", 1, "etcd")
	if err := c.Create(ctx, etcd); err != nil {
		t.Fatal(err)
	}
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "etcd-main-0"}}
	if err := controllerutil.SetControllerReference(etcd, lease, c.Scheme()); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, lease); err != nil {
		t.Fatal(err)
	}
	if err := etcdstatus.Patch(ctx, c, etcd, etcdstatus.WriterRecovery, func(s *druidv1alpha1.EtcdStatus) {
		s.Recovery = &druidv1alpha1.RecoveryRequest{Member: "etcd-main-0", PodUID: "uid-0", Token: "restored-1", Reason: "test"}
	}); err != nil {
		t.Fatal(err)
	}

	root := t.TempDir()
	dataDir := filepath.Join(root, "new.etcd")
	peer := "https://etcd-main-0.etcd-main-peer.agents.svc:2380"
	init, err := agent.NewInitializer(agent.InitConfig{
		ConfigFile:  filepath.Join(root, "etcd.conf.yaml"),
		ClientPort:  1,
		ClientFiles: agent.ClientFiles{CAFile: filepath.Join(root, "missing-ca.crt"), CertFile: filepath.Join(root, "missing.crt"), KeyFile: filepath.Join(root, "missing.key")},
		Lease:       "etcd-main-0", Namespace: namespace, PodUID: "uid-0",
		PollInterval: 50 * time.Millisecond,
		EtcdFlags: []string{"--name=etcd-main-0", "--data-dir=" + dataDir, "--initial-advertise-peer-urls=" + peer,
			"--initial-cluster=etcd-main-0=" + peer, "--initial-cluster-state=existing"},
		// The restore fails as the engine fails it on a volume too small: with CheckFreeSpace's
		// error (for the data dir, asking for more than any volume has).
		BackupStore: func(context.Context) (backupstore.Store, error) {
			return nil, restore.CheckFreeSpace(dataDir, 1<<62)
		},
	}, cluster.Clientset().CoordinationV1(), c, testr.New(t))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- init.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("init step: %v", err)
		}
	}()

	for {
		l := getLease(t, cluster.Clientset().CoordinationV1(), "etcd-main-0")
		decision := l.Annotations[memberlease.AnnotationStartDecision]
		report, ok := memberlease.ParseStartReport(l.Annotations)
		if strings.HasPrefix(decision, agent.StartRuleRestoreNoSpace+": ") && ok {
			if !strings.Contains(decision, "restore needs 4611686018427387904 bytes") {
				t.Errorf("decision %q does not say what the restore needs", decision)
			}
			if n := report.NoSpace; report.PodUID != "uid-0" || n == nil || n.Need != 1<<62 || n.Free <= 0 || n.Dir != root {
				t.Errorf("start report %+v (shortage %+v), want this pod's, needing 1<<62 bytes with the free space of %s", report, report.NoSpace, root)
			}
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("no restore/no-space report on the Lease: %v", l.Annotations)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
