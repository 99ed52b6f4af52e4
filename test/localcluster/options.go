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
	// ServiceCIDR is the apiserver's --service-cluster-ip-range. Default DefaultServiceCIDR
	// (~250 Services); at most a /12, and clear of the node simulator's 10.213.0.0/16.
	ServiceCIDR string
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
	if o.ServiceCIDR == "" {
		o.ServiceCIDR = DefaultServiceCIDR
	}
	if err := validateServiceCIDR(o.ServiceCIDR); err != nil {
		return o, err
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

// podSubnets are the node simulator's pod networks (10.213.x.0/24); Services must not overlap them.
var podSubnets = &net.IPNet{IP: net.IPv4(10, 213, 0, 0).To4(), Mask: net.CIDRMask(16, 32)}

// validateServiceCIDR accepts an IPv4 range the apiserver takes (no larger than a /12, which is
// kube-apiserver's limit) that stays clear of the simulated pod networks.
func validateServiceCIDR(cidr string) error {
	ip, n, err := net.ParseCIDR(cidr)
	if err != nil || ip.To4() == nil {
		return fmt.Errorf("service CIDR %q is not an IPv4 CIDR", cidr)
	}
	if ones, _ := n.Mask.Size(); ones < 12 || ones > 28 {
		return fmt.Errorf("service CIDR %s: prefix /%d is outside /12../28", cidr, ones)
	}
	if n.Contains(podSubnets.IP) || podSubnets.Contains(n.IP) {
		return fmt.Errorf("service CIDR %s overlaps the node simulator's pod subnets %s", cidr, podSubnets)
	}
	return nil
}

// kubernetesServiceIP is the first address of the range, which the apiserver gives the
// `kubernetes` Service; its serving certificate must name it.
func kubernetesServiceIP(cidr string) (net.IP, error) {
	_, n, err := net.ParseCIDR(cidr)
	if err != nil {
		return nil, fmt.Errorf("service CIDR %q: %w", cidr, err)
	}
	ip := n.IP.To4()
	if ip == nil {
		return nil, fmt.Errorf("service CIDR %s is not IPv4", cidr)
	}
	first := make(net.IP, len(ip))
	copy(first, ip)
	first[3]++
	return first, nil
}
