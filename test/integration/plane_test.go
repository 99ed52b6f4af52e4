package integration

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/etcd-conductor/etcd-conductor/test/localcluster"
)

// The tests that need nothing of a control plane but the chart's CRDs (no kube-controller-manager,
// no CRDs of their own, no cluster-scoped objects of their own) share one etcd + kube-apiserver,
// started by the first of them and stopped in TestMain: a start costs several seconds, most of
// what such a test takes. Each test works in a namespace of its own (testNamespace), and an
// operator a test starts watches only that namespace (OperatorOptions.WatchNamespaces), so no test
// sees another's objects. Tests that change cluster-scoped state (CRDs, ClusterRoles, admission
// policies), need kube-controller-manager or an operator that watches every namespace start their
// own with localcluster.StartForTest.
//
// The shared-plane tests that mostly wait (on an operator's retries and rechecks, or a window in
// which something must not happen) and start no etcd members call t.Parallel: they run side by
// side once the others are done (make test's -parallel). The tests with real members, whose
// timeouts (leader transfers, grace periods) are what they check, run one at a time.
var plane struct {
	once sync.Once
	env  *localcluster.Cluster
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if plane.env != nil {
		if err := plane.env.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stop the shared control plane: %v\n", err)
			if code == 0 {
				code = 1
			}
		}
	}
	os.Exit(code)
}

// sharedControlPlane is the package's shared control plane (etcd, kube-apiserver, the chart's
// CRDs), started on first use. Use it with testNamespace, and confine operators to that namespace.
func sharedControlPlane(t *testing.T) *localcluster.Cluster {
	t.Helper()
	localcluster.SkipWithoutBinaries(t, "")
	plane.once.Do(func() {
		plane.env, plane.err = localcluster.Start(context.Background(), localcluster.Options{NoControllerManager: true, CRDs: true})
	})
	if plane.err != nil {
		t.Fatalf("start the shared control plane: %v", plane.err)
	}
	return plane.env
}

var namespaces struct {
	sync.Mutex
	used map[string]int
}

// testNamespace is the name of a test's namespace in the shared control plane: name the first time
// the process asks for it, name-2, name-3… on later asks (go test -count=N runs each test N times
// against the one plane, whose namespaces are never removed: nothing runs the namespace
// controller).
func testNamespace(name string) string {
	namespaces.Lock()
	defer namespaces.Unlock()
	if namespaces.used == nil {
		namespaces.used = map[string]int{}
	}
	namespaces.used[name]++
	if n := namespaces.used[name]; n > 1 {
		return fmt.Sprintf("%s-%d", name, n)
	}
	return name
}
