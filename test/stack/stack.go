// Package stack brings up the whole proving ground in one call: a bridge network for pods, a real
// control plane (etcd, kube-apiserver, kube-controller-manager) bound to the bridge gateway, and
// the node simulator playing kubelet, with the project binary `make build` wrote running the sidecars,
// and the chart's member Lease admission policy. Etcd namespaces enforce the restricted Pod Security
// Standard.
// The e2e scenarios, the benchmark and the demo all stand on it; the operator is started
// separately (framework.RunOperator) because scenarios stop and restart it.
package stack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-conductor/etcd-conductor/test/framework"
	"github.com/etcd-conductor/etcd-conductor/test/localcluster"
	"github.com/etcd-conductor/etcd-conductor/test/nodesim"
)

// Options configure Start.
type Options struct {
	// WorkDir holds everything; a temp dir when empty (removed by Stop).
	WorkDir string
	// FeatureGates for kube-apiserver and kube-controller-manager, e.g. "MaxUnavailableStatefulSet=true".
	FeatureGates string
	// Log receives process start/stop lines (default: discarded); SimLog the simulator's logs.
	Log    io.Writer
	SimLog logr.Logger
	// BackoffBase for the simulator's CrashLoopBackOff (default 1s, kubelet's is 10s, which only
	// makes scenarios slower without changing what they show).
	BackoffBase time.Duration
	// OCIImages maps image references to OCI archives the simulator runs them from
	// (nodesim.Options.OCIImages), e.g. the chart's image to make image's archive; an exact
	// reference wins over the project repository's mapping to the host binary.
	OCIImages map[string]string
}

// Stack is a running proving ground.
type Stack struct {
	Network *nodesim.Network
	Cluster *localcluster.Cluster
	Sim     *nodesim.Simulator
	Client  client.Client
	Kube    kubernetes.Interface
	// Binary is the etcd-conductor the member-agent sidecars run (localcluster.ProjectBinary).
	Binary string

	workDir    string
	ownWorkDir bool

	// clusters are the Etcds created on the stack whose namespace still exists (track, untrack).
	clustersMu sync.Mutex
	clusters   []*EtcdCluster
}

// Start brings the stack up. On error everything started so far is torn down.
func Start(ctx context.Context, o Options) (_ *Stack, err error) {
	s := &Stack{workDir: o.WorkDir}
	if s.workDir == "" {
		if s.workDir, err = os.MkdirTemp("", "etcd-conductor-stack-"); err != nil {
			return nil, err
		}
		s.ownWorkDir = true
	}
	defer func() {
		if err != nil {
			_ = s.Stop()
		}
	}()
	if o.Log == nil {
		o.Log = io.Discard
	}
	if o.BackoffBase == 0 {
		o.BackoffBase = time.Second
	}

	if s.Binary, err = localcluster.ProjectBinary(); err != nil {
		return nil, err
	}
	if s.Network, err = nodesim.SetupFreeNetwork("ecst"); err != nil {
		return nil, fmt.Errorf("setting up the pod network: %w", err)
	}
	s.Cluster, err = localcluster.Start(ctx, localcluster.Options{
		WorkDir:      filepath.Join(s.workDir, "cluster"),
		BindAddress:  s.Network.GatewayIP(),
		FeatureGates: o.FeatureGates,
		CRDs:         true,
		Log:          o.Log,
		// The disruption controller keeps the PodDisruptionBudgets' status, which evictions are
		// checked against, as in any real cluster.
		Controllers: append(slices.Clone(localcluster.DefaultControllers), "disruption"),
	})
	if err != nil {
		return nil, fmt.Errorf("starting the control plane: %w", err)
	}
	s.Kube, s.Client = s.Cluster.Clientset(), s.Cluster.Client()
	if err := InstallMemberLeasePolicy(ctx, s.Kube, filepath.Join(s.workDir, "helm")); err != nil {
		return nil, err
	}
	if err := InstallMemberReportPolicy(ctx, s.Kube, filepath.Join(s.workDir, "helm")); err != nil {
		return nil, err
	}
	host, port := s.Cluster.APIServerHost()
	s.Sim, err = nodesim.Start(ctx, nodesim.Options{
		Client:        s.Kube,
		Network:       s.Network,
		Images:        map[string]string{strings.Split(framework.MemberAgentImage, ":")[0]: s.Binary},
		OCIImages:     o.OCIImages,
		APIServerHost: host,
		APIServerPort: port,
		BackoffBase:   o.BackoffBase,
		BackoffMax:    8 * o.BackoffBase,
		Log:           o.SimLog,
		WorkDir:       filepath.Join(s.workDir, "node"),
	})
	if err != nil {
		return nil, fmt.Errorf("starting the node simulator: %w", err)
	}
	return s, nil
}

// Stop tears everything down in reverse order and reports every failure.
func (s *Stack) Stop() error {
	var errs []error
	s.clustersMu.Lock()
	for _, c := range s.clusters {
		c.stopWatching()
	}
	s.clusters = nil
	s.clustersMu.Unlock()
	if s.Sim != nil {
		errs = append(errs, s.Sim.Stop())
		s.Sim = nil
	}
	if s.Cluster != nil {
		errs = append(errs, s.Cluster.Stop())
		s.Cluster = nil
	}
	if s.Network != nil {
		errs = append(errs, s.Network.Teardown())
		s.Network = nil
	}
	if s.ownWorkDir {
		errs = append(errs, os.RemoveAll(s.workDir))
		s.ownWorkDir = false
	}
	return errors.Join(errs...)
}
