package fleet

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/etcd-conductor/etcd-conductor/test/bench/report"
	"github.com/etcd-conductor/etcd-conductor/test/framework"
	"github.com/etcd-conductor/etcd-conductor/test/localcluster"
)

// ScopeOptions configure the scope benchmark (make bench-scope): the manager's informer cache
// holds only the pods and Leases with the managed-by label, so its memory must not follow the
// cluster's pods and Leases. The benchmark starts a control plane and the manager, creates N
// unrelated pods and N unrelated Leases in other namespaces, and reports the manager's memory
// before and after, beside a process that runs the manager's own cache options without the label
// selectors (what the manager would hold without them).
type ScopeOptions struct {
	// N pods and N Leases (default 20,000 each), Namespaces namespaces (default 20) for them.
	N, Namespaces int
	// Workers create them concurrently (default 8).
	Workers int
	// Contrasts run caches without the selectors, each a command (the scopebench binary with
	// -informer) given -informer-kubeconfig and answering "measure p l" on stdin.
	Contrasts []Contrast
	// Samples of each figure, a second apart; the smallest is reported (default 5).
	Samples int
	WorkDir string
	Log     io.Writer
}

func (o ScopeOptions) withDefaults() ScopeOptions {
	if o.N == 0 {
		o.N = 20000
	}
	if o.Namespaces == 0 {
		o.Namespaces = 20
	}
	if o.Workers == 0 {
		o.Workers = 8
	}
	if o.Samples == 0 {
		o.Samples = 5
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	return o
}

// Memory is one process's memory at one moment, the smallest of a few samples: heap in use
// (Go's HeapInuse: live objects and garbage not yet collected) and resident set size.
type Memory struct {
	HeapInuseBytes int64 `json:"heapInuseBytes"`
	RSSBytes       int64 `json:"rssBytes"`
}

// Contrast is a cache run beside the manager in a process of its own.
type Contrast struct {
	Name    string
	Command []string
}

// ScopeResult is what the scope benchmark measured.
type ScopeResult struct {
	N             int              `json:"n"`
	CreateSeconds float64          `json:"createSeconds"`
	ManagerBefore Memory           `json:"managerBefore"`
	ManagerAfter  Memory           `json:"managerAfter"`
	Contrasts     []ContrastResult `json:"contrasts"`
	LoadStart     float64          `json:"loadStart"`
	LoadEnd       float64          `json:"loadEnd"`
}

// ContrastResult is one contrast's memory and the objects its cache held at the end.
type ContrastResult struct {
	Name    string `json:"name"`
	Before  Memory `json:"before"`
	After   Memory `json:"after"`
	Objects int    `json:"objects"`
}

// ContrastReport is one line the contrast process writes for each "measure": what its cache holds
// and its own memory.
type ContrastReport struct {
	Pods, Leases   int
	HeapInuseBytes int64
	Error          string `json:",omitempty"`
}

// RunScope runs the scope benchmark with the manager binary bin.
func RunScope(ctx context.Context, bin Binary, o ScopeOptions) (res ScopeResult, err error) {
	o = o.withDefaults()
	res = ScopeResult{N: o.N, LoadStart: report.LoadAverage()}
	defer func() { res.LoadEnd = report.LoadAverage() }()
	logf := func(format string, args ...any) {
		fmt.Fprintf(o.Log, "%s [scope N=%d] %s\n", time.Now().UTC().Format("15:04:05"), o.N, fmt.Sprintf(format, args...))
	}
	// No kube-controller-manager: the pods need no node, ReplicaSet or garbage collector, and its
	// informers would hold every one of them on the same two cores.
	cluster, err := localcluster.Start(ctx, localcluster.Options{WorkDir: filepath.Join(o.WorkDir, "cluster"), CRDs: true, NoControllerManager: true})
	if err != nil {
		return res, fmt.Errorf("starting the control plane: %w", err)
	}
	defer func() {
		if err := cluster.Stop(); err != nil {
			logf("stopping the control plane: %v", err)
		}
	}()
	token, err := createScraper(ctx, cluster)
	if err != nil {
		return res, err
	}
	m, err := (&bench{cfg: managerConfig{binary: bin, kubeconfig: cluster.KubeconfigPath(), workDir: o.WorkDir, scraperToken: token}}).start(ctx, 1)
	if err != nil {
		return res, err
	}
	defer func() { _ = m.stop() }()
	var contrasts []*contrastProcess
	defer func() {
		for _, c := range contrasts {
			c.stop()
		}
	}()
	for i, c := range o.Contrasts {
		p, err := startContrast(ctx, c.Command, cluster.KubeconfigPath(), filepath.Join(o.WorkDir, fmt.Sprintf("contrast-%d.log", i)))
		if err != nil {
			return res, fmt.Errorf("%s: %w", c.Name, err)
		}
		contrasts = append(contrasts, p)
		res.Contrasts = append(res.Contrasts, ContrastResult{Name: c.Name})
	}

	namespaces, err := scopeNamespaces(ctx, cluster, o.Namespaces)
	if err != nil {
		return res, err
	}
	// Both caches have synced an (almost) empty cluster; let the start-up garbage go.
	if err := sleep(ctx, 5*time.Second); err != nil {
		return res, err
	}
	if res.ManagerBefore, err = managerMemory(ctx, m, o.Samples); err != nil {
		return res, err
	}
	logf("before: manager heap %s RSS %s", mib(res.ManagerBefore.HeapInuseBytes), mib(res.ManagerBefore.RSSBytes))
	for i, c := range contrasts {
		r := &res.Contrasts[i]
		if r.Before, _, err = c.memory(ctx, 0, 0, o.Samples); err != nil {
			return res, fmt.Errorf("%s: %w", r.Name, err)
		}
		logf("before: %s heap %s RSS %s", r.Name, mib(r.Before.HeapInuseBytes), mib(r.Before.RSSBytes))
	}

	start := time.Now()
	if err := createUnrelated(ctx, cluster, namespaces, o.N, o.Workers, logf); err != nil {
		return res, err
	}
	res.CreateSeconds = time.Since(start).Seconds()
	logf("created %d pods and %d Leases in %.1fs", o.N, o.N, res.CreateSeconds)

	// Each contrast waits until its cache holds them all: by then the apiserver has sent every
	// event to every watcher, and the manager has had its chance to receive some.
	for i, c := range contrasts {
		r := &res.Contrasts[i]
		if r.After, r.Objects, err = c.memory(ctx, o.N, o.N, o.Samples); err != nil {
			return res, fmt.Errorf("%s: %w", r.Name, err)
		}
		logf("after: %s (%d objects) heap %s RSS %s", r.Name, r.Objects, mib(r.After.HeapInuseBytes), mib(r.After.RSSBytes))
	}
	if res.ManagerAfter, err = managerMemory(ctx, m, o.Samples); err != nil {
		return res, err
	}
	if err := m.alive(); err != nil {
		return res, err
	}
	logf("after: manager heap %s RSS %s", mib(res.ManagerAfter.HeapInuseBytes), mib(res.ManagerAfter.RSSBytes))
	return res, nil
}

// scopeNamespaces creates the namespaces of the unrelated objects, each with the default
// ServiceAccount pods are admitted with (no controller manager makes it here).
func scopeNamespaces(ctx context.Context, cluster *localcluster.Cluster, n int) ([]string, error) {
	c := cluster.Client()
	var out []string
	for i := range n {
		ns, err := framework.CreateNamespace(ctx, c, fmt.Sprintf("unrelated-%02d", i), nil)
		if err != nil {
			return nil, err
		}
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default"}}
		if err := c.Create(ctx, sa); err != nil {
			return nil, fmt.Errorf("creating the default ServiceAccount of %s: %w", ns, err)
		}
		out = append(out, ns)
	}
	return out, nil
}

// createUnrelated creates n pods and n Leases spread over the namespaces, none with the
// managed-by label, with workers at once. The pods are an application's as a Deployment makes
// them (labels, one container with resources, environment and a probe), not empty shells, so
// a cache holding them carries their usual weight; they stay Pending (no scheduler).
func createUnrelated(ctx context.Context, cluster *localcluster.Cluster, namespaces []string, n, workers int, logf func(string, ...any)) error {
	cfg := cluster.RESTConfig()
	cfg.QPS, cfg.Burst = 5000, 10000 // the apiserver is the limit here, not the client
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	var next, done atomic.Int64
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	stopProgress := make(chan struct{})
	go func() {
		t := time.NewTicker(10 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				logf("  %d of %d pods and Leases created", done.Load(), 2*n)
			case <-stopProgress:
				return
			}
		}
	}()
	defer close(stopProgress)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				ns := namespaces[i%len(namespaces)]
				if _, err := kube.CoreV1().Pods(ns).Create(ctx, unrelatedPod(i), metav1.CreateOptions{}); err != nil {
					errs <- fmt.Errorf("creating pod %d: %w", i, err)
					return
				}
				if _, err := kube.CoordinationV1().Leases(ns).Create(ctx, unrelatedLease(i), metav1.CreateOptions{}); err != nil {
					errs <- fmt.Errorf("creating Lease %d: %w", i, err)
					return
				}
				done.Add(2)
			}
		}()
	}
	wg.Wait()
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	return errors.Join(all...)
}

func unrelatedPod(i int) *corev1.Pod {
	app := fmt.Sprintf("shop-%03d", i%200)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("%s-%06d", app, i),
			Labels: map[string]string{"app.kubernetes.io/name": app, "app.kubernetes.io/part-of": "shop",
				"pod-template-hash": "5d8f7c9b6d", "tier": "web"},
			Annotations: map[string]string{"kubectl.kubernetes.io/restartedAt": "2026-11-26T10:00:00Z"},
		},
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken: ptr.To(false),
			Containers: []corev1.Container{{
				Name:  "app",
				Image: "registry.example.com/shop/" + app + ":1.4.2",
				Args:  []string{"--listen=:8080", "--log-format=json"},
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
				Env: []corev1.EnvVar{{Name: "SHOP_REGION", Value: "eu-west"}, {Name: "SHOP_CACHE_TTL", Value: "30s"},
					{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}},
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
					Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")},
				},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("http")}}},
			}},
		},
	}
}

func unrelatedLease(i int) *coordinationv1.Lease {
	now := metav1.NewMicroTime(time.Now())
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("worker-%06d", i)},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(fmt.Sprintf("worker-%06d_7f3e", i)),
			LeaseDurationSeconds: ptr.To[int32](15), AcquireTime: &now, RenewTime: &now},
	}
}

// managerMemory is the manager's heap in use (its own go_memstats_heap_inuse_bytes) and RSS
// (/proc), each the smallest of samples a second apart: the smallest is the closest to what it
// holds, the rest being garbage a collection had not taken yet.
func managerMemory(ctx context.Context, m *manager, samples int) (Memory, error) {
	var out Memory
	for i := range samples {
		if i > 0 {
			if err := sleep(ctx, time.Second); err != nil {
				return out, err
			}
		}
		s, err := m.scrape(ctx)
		if err != nil {
			return out, err
		}
		heap, ok := s.Sum("go_memstats_heap_inuse_bytes", nil)
		if !ok {
			return out, errors.New("the manager exports no go_memstats_heap_inuse_bytes")
		}
		p, err := procStats(m.proc.PID())
		if err != nil {
			return out, err
		}
		out = smaller(out, Memory{HeapInuseBytes: int64(heap), RSSBytes: p.RSSBytes}, i == 0)
	}
	return out, nil
}

func smaller(a, b Memory, first bool) Memory {
	if first {
		return b
	}
	return Memory{HeapInuseBytes: min(a.HeapInuseBytes, b.HeapInuseBytes), RSSBytes: min(a.RSSBytes, b.RSSBytes)}
}

// contrastProcess is the unselected cache, a child process answering "measure" on its stdin.
type contrastProcess struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  *bufio.Scanner
	cancel context.CancelFunc
}

func startContrast(ctx context.Context, command []string, kubeconfig, logPath string) (*contrastProcess, error) {
	if len(command) == 0 {
		return nil, errors.New("no contrast command")
	}
	ctx, cancel := context.WithCancel(ctx)
	cmd := exec.CommandContext(ctx, command[0], append(command[1:], "-informer-kubeconfig", kubeconfig)...)
	logFile, err := os.Create(logPath)
	if err != nil {
		cancel()
		return nil, err
	}
	cmd.Stderr = logFile
	stdin, err := cmd.StdinPipe()
	if err != nil {
		cancel()
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		cancel()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		cancel()
		return nil, fmt.Errorf("starting the unscoped cache: %w", err)
	}
	return &contrastProcess{cmd: cmd, stdin: stdin, lines: bufio.NewScanner(stdout), cancel: cancel}, nil
}

// memory asks the contrast for its memory once its cache holds at least pods pods and leases
// Leases, samples times a second apart, and returns the smallest figures and the objects held.
func (c *contrastProcess) memory(ctx context.Context, pods, leases, samples int) (Memory, int, error) {
	var out Memory
	var objects int
	for i := range samples {
		if i > 0 {
			if err := sleep(ctx, time.Second); err != nil {
				return out, 0, err
			}
		}
		if _, err := fmt.Fprintf(c.stdin, "measure %d %d\n", pods, leases); err != nil {
			return out, 0, fmt.Errorf("asking the unscoped cache: %w", err)
		}
		if !c.lines.Scan() {
			return out, 0, fmt.Errorf("the unscoped cache ended: %v", c.lines.Err())
		}
		var r ContrastReport
		if err := json.Unmarshal(c.lines.Bytes(), &r); err != nil {
			return out, 0, fmt.Errorf("the unscoped cache's answer %q: %w", c.lines.Text(), err)
		}
		if r.Error != "" {
			return out, 0, fmt.Errorf("the unscoped cache: %s", r.Error)
		}
		p, err := procStats(c.cmd.Process.Pid)
		if err != nil {
			return out, 0, err
		}
		out = smaller(out, Memory{HeapInuseBytes: r.HeapInuseBytes, RSSBytes: p.RSSBytes}, i == 0)
		objects = r.Pods + r.Leases
	}
	return out, objects, nil
}

func (c *contrastProcess) stop() {
	_ = c.stdin.Close()
	c.cancel()
	_ = c.cmd.Wait()
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// Markdown prints the figures side by side.
func (r ScopeResult) Markdown(w io.Writer) {
	fmt.Fprintf(w, "%d unrelated pods and %d unrelated Leases (no managed-by label) created in %.0f s; 1-minute load average %.1f → %.1f\n\n",
		r.N, r.N, r.CreateSeconds, r.LoadStart, r.LoadEnd)
	header := []string{"", "manager (label selectors)"}
	listed := []string{"unrelated objects listed and watched", "none (the apiserver filters)"}
	rows := [][]string{header, listed}
	figures := []struct {
		name string
		of   func(before, after Memory) int64
	}{
		{"heap in use before", func(b, _ Memory) int64 { return b.HeapInuseBytes }},
		{"heap in use after", func(_, a Memory) int64 { return a.HeapInuseBytes }},
		{"heap growth", func(b, a Memory) int64 { return a.HeapInuseBytes - b.HeapInuseBytes }},
		{"RSS before", func(b, _ Memory) int64 { return b.RSSBytes }},
		{"RSS after", func(_, a Memory) int64 { return a.RSSBytes }},
		{"RSS growth", func(b, a Memory) int64 { return a.RSSBytes - b.RSSBytes }},
	}
	for _, f := range figures {
		rows = append(rows, []string{f.name, mib(f.of(r.ManagerBefore, r.ManagerAfter))})
	}
	for _, c := range r.Contrasts {
		rows[0] = append(rows[0], c.Name)
		rows[1] = append(rows[1], fmt.Sprintf("%d (+%d of the cluster's own)", 2*r.N, c.Objects-2*r.N))
		for i, f := range figures {
			rows[2+i] = append(rows[2+i], mib(f.of(c.Before, c.After)))
		}
	}
	widths := make([]int, len(rows[0]))
	for _, row := range rows {
		for i, cell := range row {
			widths[i] = max(widths[i], len(cell))
		}
	}
	for _, row := range rows {
		var b strings.Builder
		for i, cell := range row {
			fmt.Fprintf(&b, "  %-*s", widths[i], cell)
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
}
