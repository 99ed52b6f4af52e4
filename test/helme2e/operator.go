// Package helme2e installs the operator the way users do, with `helm install` of
// charts/etcd-conductor, onto the proving-ground stack: the manager runs as the chart's
// Deployment pod on the node simulator, authenticated by its projected ServiceAccount token and
// limited by the chart's RBAC. The package test rolls an Etcd quorum-aware through that install
// and flips the gate off by `helm upgrade`; the demo (test/demo) reuses Install and RunRollout.
package helme2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/etcd-conductor/etcd-conductor/internal/version"
	"github.com/etcd-conductor/etcd-conductor/test/framework"
	"github.com/etcd-conductor/etcd-conductor/test/helmcli"
	"github.com/etcd-conductor/etcd-conductor/test/localcluster"
	"github.com/etcd-conductor/etcd-conductor/test/stack"
)

const (
	// ReleaseName and Namespace are where Install puts the chart.
	ReleaseName = "conductor"
	Namespace   = "etcd-conductor-system"
	// GateName is the feature gate the install toggles.
	GateName = "QuorumAwareUpdatesWithOnDelete"
	// imageTag is the chart's default (appVersion): make image's archive is named by it, and a
	// stack started with OCIImages() runs it from there (image.go); a stack without maps the
	// repository, any tag, to the host binary.
	imageTag = version.Version
)

// Operator is the chart installed on a stack.
type Operator struct {
	stack      *stack.Stack
	helm       string
	chart      string
	helmHome   string
	deployment string
	installed  bool
	ownHome    bool
	// namespaceCreated: Uninstall deletes the namespace too, so Install can run again.
	namespaceCreated bool
}

// InstallOptions configure Install.
type InstallOptions struct {
	// QuorumAware sets featureGates.QuorumAwareUpdatesWithOnDelete.
	QuorumAware bool
	// WorkDir receives helm's homes and logs; a temp dir when empty (removed by Uninstall).
	WorkDir string
	// Set holds more `--set` values, given after Install's own, which they override (e.g.
	// crds.install=true).
	Set []string
}

// HelmBinary is bin/helm (built by `make tools`) in the stack's binary directory.
func HelmBinary() (string, error) { return helmcli.Binary() }

// Install runs `helm install` (the stack has installed the CRDs already: crds.install=false) and
// waits until the manager's pod is Ready on the node simulator.
func Install(ctx context.Context, s *stack.Stack, o InstallOptions) (_ *Operator, err error) {
	helm, err := HelmBinary()
	if err != nil {
		return nil, err
	}
	root, err := localcluster.RepoRoot()
	if err != nil {
		return nil, err
	}
	ownHome := o.WorkDir == ""
	if ownHome {
		if o.WorkDir, err = os.MkdirTemp("", "etcd-conductor-helm-"); err != nil {
			return nil, err
		}
	}
	op := &Operator{
		ownHome:    ownHome,
		stack:      s,
		helm:       helm,
		chart:      filepath.Join(root, "charts", "etcd-conductor"),
		helmHome:   o.WorkDir,
		deployment: ReleaseName + "-etcd-conductor",
	}
	defer func() {
		if err != nil {
			_ = op.Uninstall(context.Background())
		}
	}()
	if _, err := framework.CreateNamespace(ctx, s.Client, Namespace, nil); err != nil {
		return nil, err
	}
	op.namespaceCreated = true
	args := []string{"install", ReleaseName, op.chart, "--namespace", Namespace,
		"--set", "crds.install=false",
		"--set", "image.tag=" + imageTag,
		"--set", "leaderElection.enabled=true",
		"--set", "featureGates." + GateName + "=" + strconv.FormatBool(o.QuorumAware)}
	for _, v := range o.Set {
		args = append(args, "--set", v)
	}
	if _, err := op.run(ctx, args...); err != nil {
		return nil, err
	}
	op.installed = true
	if _, err := op.WaitManagerReady(ctx); err != nil {
		return nil, err
	}
	return op, nil
}

// SetQuorumAware runs `helm upgrade --reuse-values` with the gate set, then waits until the
// Deployment has rolled out a manager pod with the new configuration and it is Ready.
func (op *Operator) SetQuorumAware(ctx context.Context, on bool) (*corev1.Pod, error) {
	if _, err := op.run(ctx, "upgrade", ReleaseName, op.chart, "--namespace", Namespace, "--reuse-values",
		"--set", "featureGates."+GateName+"="+strconv.FormatBool(on)); err != nil {
		return nil, err
	}
	return op.WaitManagerReady(ctx)
}

// WaitManagerReady waits until the Deployment's latest generation is rolled out: exactly one
// manager pod, of the current template, Ready, and no old one left. It returns that pod.
func (op *Operator) WaitManagerReady(ctx context.Context) (*corev1.Pod, error) {
	var pod *corev1.Pod
	var last string
	err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		p, state, err := op.managerState(ctx)
		if err != nil {
			state = err.Error()
		}
		pod, last = p, state
		return p != nil, nil
	})
	if err != nil {
		return nil, fmt.Errorf("manager Deployment not rolled out (%s): %w%s", last, err, op.managerLogHint())
	}
	return pod, nil
}

// managerState returns the ready manager pod once the rollout is complete, else why not.
func (op *Operator) managerState(ctx context.Context) (*corev1.Pod, string, error) {
	d, err := op.stack.Kube.AppsV1().Deployments(Namespace).Get(ctx, op.deployment, metav1.GetOptions{})
	if err != nil {
		return nil, "", fmt.Errorf("reading the manager Deployment: %w", err)
	}
	st := d.Status
	if st.ObservedGeneration < d.Generation {
		return nil, "deployment controller has not observed the latest spec", nil
	}
	if st.UpdatedReplicas != *d.Spec.Replicas || st.Replicas != *d.Spec.Replicas || st.AvailableReplicas != *d.Spec.Replicas {
		return nil, fmt.Sprintf("replicas %d updated %d available %d, want %d", st.Replicas, st.UpdatedReplicas, st.AvailableReplicas, *d.Spec.Replicas), nil
	}
	pods, err := op.managerPods(ctx, d)
	if err != nil {
		return nil, "", err
	}
	// The Deployment counts a terminating pod as gone; the old manager may still hold the lease.
	if len(pods) != 1 || pods[0].DeletionTimestamp != nil || !framework.PodReady(&pods[0]) {
		return nil, fmt.Sprintf("%d manager pods, waiting for exactly one ready", len(pods)), nil
	}
	return &pods[0], "", nil
}

func (op *Operator) managerPods(ctx context.Context, d *appsv1.Deployment) ([]corev1.Pod, error) {
	sel := labels.SelectorFromSet(d.Spec.Selector.MatchLabels).String()
	list, err := op.stack.Kube.CoreV1().Pods(Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("listing manager pods: %w", err)
	}
	return list.Items, nil
}

// ManagerLog is the log of the current manager pod's container, as the simulator captured it.
func (op *Operator) ManagerLog(ctx context.Context) (string, error) {
	d, err := op.stack.Kube.AppsV1().Deployments(Namespace).Get(ctx, op.deployment, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	pods, err := op.managerPods(ctx, d)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, p := range pods {
		log, err := op.stack.Sim.Logs(Namespace+"/"+p.Name, "manager")
		if err != nil {
			fmt.Fprintf(&b, "--- %s: %v\n", p.Name, err)
			continue
		}
		fmt.Fprintf(&b, "--- %s\n%s\n", p.Name, log)
	}
	return b.String(), nil
}

func (op *Operator) managerLogHint() string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	log, err := op.ManagerLog(ctx)
	if err != nil || log == "" {
		return ""
	}
	return "\nmanager log:\n" + tail(log, 3000)
}

// Uninstall removes the release and stops the Deployment controllers it started. Everything
// else goes with the stack.
func (op *Operator) Uninstall(ctx context.Context) error {
	var errs []error
	if op.installed {
		if _, err := op.run(ctx, "uninstall", ReleaseName, "--namespace", Namespace, "--wait", "--timeout", "60s"); err != nil {
			errs = append(errs, err)
		}
		op.installed = false
	}
	if op.namespaceCreated {
		errs = append(errs, op.stack.DeleteNamespace(ctx, Namespace))
		op.namespaceCreated = false
	}
	return errors.Join(append(errs, op.Stop())...)
}

// Stop removes helm's homes, leaving the release in the cluster: for callers about to stop the
// whole stack anyway.
func (op *Operator) Stop() error {
	var errs []error
	if op.ownHome {
		errs = append(errs, os.RemoveAll(op.helmHome))
		op.ownHome = false
	}
	return errors.Join(errs...)
}

// run runs helm against the stack's admin kubeconfig, with helm's homes in the work dir.
func (op *Operator) run(ctx context.Context, args ...string) (string, error) {
	return helmcli.Run(ctx, op.helm, op.helmHome, append(args, "--kubeconfig", op.stack.Cluster.KubeconfigPath())...)
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}
