// Command scopebench runs the scope benchmark (`make bench-scope`): the manager on a local control
// plane while tens of thousands of pods and Leases it does not manage are created, its memory
// before and after beside a process running the manager's own cache options without their label
// selectors. With -informer it is that process: it caches every pod and Lease of the cluster and
// answers "measure <pods> <leases>" on stdin, once its cache holds that many, with a JSON line of
// what it holds and its heap in use.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/etcd-conductor/etcd-conductor/internal/operator"
	"github.com/etcd-conductor/etcd-conductor/test/bench/fleet"
)

func main() {
	n := flag.Int("n", 20000, "unrelated pods, and as many unrelated Leases")
	namespaces := flag.Int("namespaces", 20, "namespaces they are spread over")
	workers := flag.Int("workers", 8, "concurrent creators")
	samples := flag.Int("samples", 5, "samples of each figure, a second apart (the smallest is reported)")
	out := flag.String("out", "", "also write the figures as JSON to this file")
	informer := flag.Bool("informer", false, "be an unscoped cache (started by the benchmark itself)")
	plain := flag.Bool("plain", false, "with -informer: a plain cache of whole objects, without the manager's transforms")
	kubeconfig := flag.String("informer-kubeconfig", "", "with -informer: the cluster (-kubeconfig is controller-runtime's)")
	flag.Parse()
	ctrllog.SetLogger(logr.Discard())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	var err error
	if *informer {
		err = serveUnscoped(ctx, *kubeconfig, *plain)
	} else {
		err = run(ctx, *n, *namespaces, *workers, *samples, *out)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "scopebench: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, n, namespaces, workers, samples int, out string) error {
	bin, err := fleet.CurrentBinary("current")
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	workDir, err := os.MkdirTemp("", "etcd-conductor-scopebench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(workDir)
	res, err := fleet.RunScope(ctx, bin, fleet.ScopeOptions{N: n, Namespaces: namespaces, Workers: workers, Samples: samples,
		Contrasts: []fleet.Contrast{
			{Name: "same cache, no selectors", Command: []string{self, "-informer"}},
			{Name: "plain cache of all pods and Leases", Command: []string{self, "-informer", "-plain"}},
		}, WorkDir: workDir, Log: os.Stderr})
	if err != nil {
		return err
	}
	fmt.Println()
	res.Markdown(os.Stdout)
	if out == "" {
		return nil
	}
	data, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	return os.WriteFile(out, append(data, '\n'), 0o644)
}

// serveUnscoped runs the manager's cache options with the label selectors taken out (their
// transforms kept: managed fields stripped, pods cut to metadata and status), so the difference
// to the manager is the selectors alone; plain, controller-runtime's default cache instead, whole
// objects as an informer written without care holds them.
func serveUnscoped(ctx context.Context, kubeconfig string, plain bool) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	opts := operator.CacheOptions(nil)
	for obj, by := range opts.ByObject {
		by.Label = nil
		opts.ByObject[obj] = by
	}
	if plain {
		opts = cache.Options{}
	}
	opts.Scheme = clientgoscheme.Scheme
	c, err := cache.New(cfg, opts)
	if err != nil {
		return err
	}
	pods, err := store(ctx, c, &corev1.Pod{})
	if err != nil {
		return err
	}
	leases, err := store(ctx, c, &coordinationv1.Lease{})
	if err != nil {
		return err
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		return fmt.Errorf("the cache did not sync")
	}
	lines := bufio.NewScanner(os.Stdin)
	enc := json.NewEncoder(os.Stdout)
	for lines.Scan() {
		var wantPods, wantLeases int
		if _, err := fmt.Sscanf(lines.Text(), "measure %d %d", &wantPods, &wantLeases); err != nil {
			return fmt.Errorf("request %q: %w", lines.Text(), err)
		}
		rep := measure(ctx, pods, leases, wantPods, wantLeases)
		if err := enc.Encode(rep); err != nil {
			return err
		}
	}
	return lines.Err()
}

// store is the informer's own store of obj's kind: counting it copies no object.
func store(ctx context.Context, c cache.Cache, obj client.Object) (toolscache.Store, error) {
	inf, err := c.GetInformer(ctx, obj)
	if err != nil {
		return nil, err
	}
	s, ok := inf.(interface{ GetStore() toolscache.Store })
	if !ok {
		return nil, fmt.Errorf("informer %T has no store", inf)
	}
	return s.GetStore(), nil
}

// measure waits (up to 10 minutes) until the stores hold the objects asked for, then collects
// garbage and reads the heap: what the cache holds, not what it dropped.
func measure(ctx context.Context, pods, leases toolscache.Store, wantPods, wantLeases int) fleet.ContrastReport {
	deadline := time.Now().Add(10 * time.Minute)
	for len(pods.ListKeys()) < wantPods || len(leases.ListKeys()) < wantLeases {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fleet.ContrastReport{Pods: len(pods.ListKeys()), Leases: len(leases.ListKeys()),
				Error: fmt.Sprintf("cache holds %d pods and %d Leases, want %d and %d", len(pods.ListKeys()), len(leases.ListKeys()), wantPods, wantLeases)}
		}
		time.Sleep(200 * time.Millisecond)
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return fleet.ContrastReport{Pods: len(pods.ListKeys()), Leases: len(leases.ListKeys()), HeapInuseBytes: int64(ms.HeapInuse)}
}
