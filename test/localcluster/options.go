package localcluster

import (
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/etcd-conductor/etcd-conductor/etcdclient/etcdtest"
)

// BinDirEnv overrides where the control-plane binaries are looked up.
const BinDirEnv = etcdtest.BinDirEnv

// Binary names inside the bin dir, as test/tools/build-binaries.sh links them.
const (
	EtcdBinary              = "etcd-3.6.8" // the version Kubernetes 1.36 is tested with
	APIServerBinary         = "kube-apiserver"
	ControllerManagerBinary = "kube-controller-manager"
)

// DefaultControllers run the StatefulSet machinery, what pods need to be admitted (the default
// ServiceAccount, kube-root-ca.crt), and what deleting namespaces and claims needs (namespace,
// pvc/pv-protection), plus the built-in view/edit/admin roles (clusterrole-aggregation) and Deployments (the operator's
// own, installed by its Helm chart).
// node-lifecycle is left out: it would mark simulated nodes NotReady unless their Lease is renewed.
var DefaultControllers = []string{
	"statefulset",
	"garbage-collector",
	"serviceaccount",
	"serviceaccount-token",
	"root-ca-certificate-publisher",
	"namespace",
	"persistentvolume-protection",
	"persistentvolumeclaim-protection",
	"clusterrole-aggregation",
	"deployment",
	"replicaset",
}

// Options configures Start. The zero value is a usable loopback cluster.
type Options struct {
	// BinDir holds etcd-3.6.8, kube-apiserver and kube-controller-manager.
	// Default: $ETCD_CONDUCTOR_BIN_DIR, else <repo root>/bin.
	BinDir string
	// WorkDir receives all state: certs, etcd data, logs, kubeconfigs and the
	// record of started processes. It must be empty or absent. Default: a
	// new temp dir.
	WorkDir string
	// KeepWorkDir leaves WorkDir in place on Stop (for reading logs).
	KeepWorkDir bool
	// BindAddress is where kube-apiserver listens and what the kubeconfigs
	// point at. Default 127.0.0.1. Simulated pods in network namespaces reach
	// the host only through their bridge, so the node simulator passes the
	// bridge gateway address here. etcd always stays on 127.0.0.1.
	BindAddress string
	// FeatureGates is passed to kube-apiserver and kube-controller-manager,
	// e.g. "MaxUnavailableStatefulSet=true".
	FeatureGates string
	// Controllers for kube-controller-manager; names with or without the
	// "-controller" suffix. Default DefaultControllers.
	Controllers []string
	// NoControllerManager runs etcd and kube-apiserver only, for tests that
	// play the controllers themselves (objects stay as the test wrote them).
	// Nothing then creates the default ServiceAccounts, so the ServiceAccount
	// admission plugin is off, as in controller-runtime's envtest.
	NoControllerManager bool
	// CRDs installs the chart's CustomResourceDefinitions before Start
	// returns, as `helm install` does first.
	CRDs bool
	// CRDDir installs the CRDs of this directory instead (e.g. an older
	// version of the chart's).
	CRDDir string
	// Log receives one line per process start and stop; process output goes
	// to files under WorkDir/logs. Default: discarded.
	Log io.Writer
	// Detach lets the processes outlive the caller (`localcluster up`):
	// they get their own session and no parent-death signal.
	Detach bool
}

// DefaultBinDir is $ETCD_CONDUCTOR_BIN_DIR, or <repo root>/bin, as an
// absolute path.
var DefaultBinDir = etcdtest.BinDir

// RepoRoot is the checkout: the nearest directory above the working
// directory that holds go.mod.
var RepoRoot = etcdtest.RepoRoot

// MissingBinaries lists the binaries Start needs that binDir lacks.
func MissingBinaries(binDir string) []string {
	var missing []string
	for _, name := range []string{EtcdBinary, APIServerBinary, ControllerManagerBinary} {
		if _, err := os.Stat(filepath.Join(binDir, name)); err != nil {
			missing = append(missing, name)
		}
	}
	return missing
}

// withDefaults fills in defaults and validates; it does not touch the disk
// except to resolve the repo root.
func (o Options) withDefaults() (Options, error) {
	if o.BinDir == "" {
		dir, err := DefaultBinDir()
		if err != nil {
			return o, err
		}
		o.BinDir = dir
	}
	if missing := MissingBinaries(o.BinDir); len(missing) > 0 {
		return o, fmt.Errorf("binaries missing in %s: %s (run `make tools`)", o.BinDir, strings.Join(missing, ", "))
	}
	if o.BindAddress == "" {
		o.BindAddress = "127.0.0.1"
	}
	if net.ParseIP(o.BindAddress) == nil {
		return o, fmt.Errorf("bind address %q is not an IP address", o.BindAddress)
	}
	if ip := net.ParseIP(o.BindAddress); ip.IsUnspecified() {
		return o, fmt.Errorf("bind address %s would listen on every interface; give loopback or a bridge address", o.BindAddress)
	}
	if len(o.Controllers) == 0 {
		o.Controllers = DefaultControllers
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	return o, nil
}

// controllerFlag turns short names ("statefulset") into the names
// kube-controller-manager 1.36 lists ("statefulset-controller"), leaving
// "*" and "-name" forms alone apart from the suffix.
func controllerFlag(names []string) string {
	out := make([]string, 0, len(names))
	for _, n := range names {
		if n != "*" && !strings.HasSuffix(n, "-controller") {
			n += "-controller"
		}
		out = append(out, n)
	}
	return strings.Join(out, ",")
}
