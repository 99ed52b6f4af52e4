package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/etcd-conductor/etcd-conductor/test/localcluster"
	"github.com/etcd-conductor/etcd-conductor/test/localcluster/proc"
)

// The processes of `up` outlive the command; `down` must find them by the
// record in the dir alone.
func TestUpStatusDown(t *testing.T) {
	localcluster.SkipWithoutBinaries(t, "")
	dir := filepath.Join(t.TempDir(), "cluster")
	t.Cleanup(func() { _ = localcluster.StopWorkDir(dir, nil) })

	var stdout, stderr bytes.Buffer
	// 127.0.0.2 is loopback too, but not the default: it proves the bind
	// address reaches the serving certificate and the kubeconfig.
	if err := run([]string{"up", "--dir", dir, "--bind-address", "127.0.0.2"}, &stdout, &stderr); err != nil {
		t.Fatalf("up: %v\n%s", err, stderr.String())
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if want := "export KUBECONFIG=" + kubeconfig; !strings.Contains(stdout.String(), want) {
		t.Errorf("up printed %q, want a line %q", stdout.String(), want)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatalf("load kubeconfig: %v", err)
	}
	if !strings.Contains(cfg.Host, "127.0.0.2") {
		t.Errorf("kubeconfig server = %s, want the bind address 127.0.0.2", cfg.Host)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	if _, err := cs.Discovery().ServerVersion(); err != nil {
		t.Fatalf("talk to the apiserver through the printed kubeconfig: %v", err)
	}

	recs, err := localcluster.Running(dir)
	if err != nil || len(recs) != 3 {
		t.Fatalf("after up: running = %v (err %v), want 3 processes", recs, err)
	}

	stdout.Reset()
	err = run([]string{"up", "--dir", dir}, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "already up") {
		t.Errorf("second up: err = %v, want a refusal", err)
	}

	stdout.Reset()
	if err := run([]string{"status", "--dir", dir}, &stdout, &stderr); err != nil {
		t.Fatalf("status: %v", err)
	}
	for _, name := range []string{"etcd", "kube-apiserver", "kube-controller-manager"} {
		if !strings.Contains(stdout.String(), name+" pid=") {
			t.Errorf("status output lacks %s:\n%s", name, stdout.String())
		}
	}

	if err := run([]string{"down", "--dir", dir}, &stdout, &stderr); err != nil {
		t.Fatalf("down: %v\n%s", err, stderr.String())
	}
	for _, r := range recs {
		if proc.Running(r.PID) {
			t.Errorf("%s (pid %d) survived down", r.Name, r.PID)
		}
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("down left %s behind (stat: %v)", dir, err)
	}
}
