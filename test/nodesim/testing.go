package nodesim

import (
	"context"
	"testing"

	"github.com/go-logr/logr/testr"
)

// NetworkForTest claims a free bridge and subnet ("ecsim<N>", 10.213.N.0/24)
// and tears it down when the test ends. Create it before the control plane
// so kube-apiserver can bind to its GatewayIP.
func NetworkForTest(t testing.TB) *Network {
	t.Helper()
	n, err := SetupFreeNetwork("ecsim")
	if err != nil {
		t.Fatalf("nodesim network: %v", err)
	}
	t.Cleanup(func() {
		if err := n.Teardown(); err != nil {
			t.Errorf("tearing down nodesim network: %v", err)
		}
	})
	return n
}

// StartForTest starts a simulator that is stopped when the test ends, even
// if it fails. Logs go to the test log unless o.Log is set; the work
// directory defaults to a test temp dir. The Network in o must outlive it:
// cleanups run last-registered first, so create the network before calling this.
func StartForTest(t testing.TB, o Options) *Simulator {
	t.Helper()
	if o.Log.GetSink() == nil {
		o.Log = testr.NewWithInterface(t, testr.Options{Verbosity: 1})
	}
	if o.WorkDir == "" {
		o.WorkDir = t.TempDir()
	}
	s, err := Start(context.Background(), o)
	if err != nil {
		t.Fatalf("starting nodesim: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Errorf("stopping nodesim: %v", err)
		}
	})
	return s
}
