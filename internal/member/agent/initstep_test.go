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

	"github.com/etcd-conductor/etcd-conductor/internal/contract/memberlease"
	"github.com/etcd-conductor/etcd-conductor/internal/member/agent"
	"github.com/etcd-conductor/etcd-conductor/internal/member/datadir"
)

// TestInitReportsDataKeptAside runs the init step against a real apiserver with twelve data dirs
// kept aside next to its data dir (set aside by datadir.MoveAside, an hour apart, the one of
// hour i holding i+1 KiB): its report on the Lease lists the newest ten, newest first, and counts
// all twelve with their bytes, in the same patch as its start decision.
func TestInitReportsDataKeptAside(t *testing.T) {
	leases := startAPIServer(t)
	createLease(t, leases, "etcd-main-0")
	root := t.TempDir()
	dataDir := filepath.Join(root, "new.etcd")
	first := time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)
	var wantBytes int64
	for i := range 12 {
		if err := os.MkdirAll(filepath.Join(dataDir, "member"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dataDir, "member", "data"), make([]byte, (i+1)<<10), 0o644); err != nil {
			t.Fatal(err)
		}
		wantBytes += int64(i+1) << 10
		if _, err := datadir.MoveAside(dataDir, first.Add(time.Duration(i)*time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	peer := "https://etcd-main-0.etcd-main-peer.agents.svc:2380"
	init, err := agent.NewInitializer(agent.InitConfig{
		ConfigFile:  filepath.Join(root, "etcd.conf.yaml"),
		ClientPort:  1,
		ClientFiles: agent.ClientFiles{CAFile: filepath.Join(root, "missing-ca.crt"), CertFile: filepath.Join(root, "missing.crt"), KeyFile: filepath.Join(root, "missing.key")},
		Lease:       "etcd-main-0", Namespace: namespace, PodUID: "uid-0",
		PollInterval: 50 * time.Millisecond,
		EtcdFlags: []string{"--name=etcd-main-0", "--data-dir=" + dataDir, "--initial-advertise-peer-urls=" + peer,
			"--initial-cluster=etcd-main-0=" + peer, "--initial-cluster-state=new"},
	}, leases, nil, testr.New(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- init.Run(ctx) }()

	var report memberlease.DataAside
	for {
		lease := getLease(t, leases, "etcd-main-0")
		var ok bool
		if report, ok = memberlease.ParseDataAside(lease.Annotations); ok && lease.Annotations[memberlease.AnnotationStartDecision] != "" {
			t.Logf("%s: %s", memberlease.AnnotationDataAside, lease.Annotations[memberlease.AnnotationDataAside])
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("no data-aside report on the Lease: %v", lease.Annotations)
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("init step: %v", err)
	}

	if report.Count != 12 || report.Bytes != wantBytes {
		t.Errorf("reported %d data dirs of %d bytes aside, want 12 of %d", report.Count, report.Bytes, wantBytes)
	}
	if len(report.Newest) != memberlease.MaxAsideListed {
		t.Fatalf("listed %d, want the newest %d", len(report.Newest), memberlease.MaxAsideListed)
	}
	newest := report.Newest[0]
	if want := dataDir + ".aside-20261126T110000Z"; newest.Path != want || !newest.Time.Equal(first.Add(11*time.Hour)) || newest.Bytes != 12<<10 {
		t.Errorf("newest %+v, want %s at %s of %d bytes", newest, want, first.Add(11*time.Hour), 12<<10)
	}
	if oldest := report.Newest[len(report.Newest)-1]; !strings.HasSuffix(oldest.Path, ".aside-20261126T020000Z") {
		t.Errorf("oldest listed %s, want the one of 02:00 (the two older ones only counted)", oldest.Path)
	}
}
