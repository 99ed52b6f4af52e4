// Package fleet measures what a fleet of Etcds costs the operator: N Etcds on the local control
// plane (real kube-apiserver and kube-controller-manager, no kubelet: pods stay Pending, so only the
// operator's own cost shows), the manager run as a process from the binary under test. For each
// binary it measures convergence from creation, then a restart with nothing to change (time until
// every work queue has processed the fleet and is empty, apiserver requests by verb and resource
// from the apiserver's own apiserver_request_total, RSS, CPU, reconcile-time quantiles,
// goroutines, member connections), then a restart during which one Etcd's image is bumped (time
// until the operator acts on it).
package fleet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
	"github.com/etcd-conductor/etcd-conductor/test/bench/report"
	"github.com/etcd-conductor/etcd-conductor/test/framework"
	"github.com/etcd-conductor/etcd-conductor/test/localcluster"
	"github.com/etcd-conductor/etcd-conductor/tls/testpki"
)

// Options configure one measurement of one binary.
type Options struct {
	// N Etcds of Replicas members, PerNamespace to a namespace (as a hosted control plane's
	// namespace holds its main and events Etcds).
	N            int
	Replicas     int32
	PerNamespace int
	// ServiceCIDR must hold every Etcd's ClusterIP Service (default 10.0.0.0/16).
	ServiceCIDR string
	// NoControllerManager leaves the StatefulSets without pods. By default
	// kube-controller-manager runs its StatefulSet controller, so each member has a (Pending) pod
	// and the operator's pod informers and pod-triggered reconciles carry their real weight.
	NoControllerManager bool
	// FeatureGates for the manager (both binaries must know them).
	FeatureGates map[string]bool
	// ExtraConfig per binary label: OperatorConfiguration fields only that binary knows.
	ExtraConfig map[string]string
	// Bump measures a second restart during which one Etcd's image changes.
	Bump bool
	// ConvergeTimeout and RestartTimeout bound each phase (a phase that runs out is reported as
	// such, not as a figure).
	ConvergeTimeout time.Duration
	RestartTimeout  time.Duration
	// SteadyWindow follows the quiet restart to measure the reconciles once its burst is over
	// (default 15 s).
	SteadyWindow time.Duration
	// WorkDir keeps the manager logs and configurations; Log gets progress lines.
	WorkDir string
	Log     io.Writer
}

func (o Options) withDefaults() Options {
	if o.Replicas == 0 {
		o.Replicas = 3
	}
	if o.PerNamespace == 0 {
		o.PerNamespace = 10
	}
	if o.ServiceCIDR == "" {
		o.ServiceCIDR = "10.0.0.0/16"
	}
	if o.ConvergeTimeout == 0 {
		o.ConvergeTimeout = 30 * time.Minute
	}
	if o.RestartTimeout == 0 {
		o.RestartTimeout = 20 * time.Minute
	}
	if o.SteadyWindow == 0 {
		o.SteadyWindow = 15 * time.Second
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	return o
}

// Result is one binary's figures.
type Result struct {
	Binary    Binary         `json:"binary"`
	N         int            `json:"n"`
	Replicas  int32          `json:"replicas"`
	Pods      bool           `json:"pods"`
	LoadStart float64        `json:"loadAverageAtStart"`
	LoadEnd   float64        `json:"loadAverageAtEnd"`
	Converge  ConvergeResult `json:"converge"`
	Restart   RestartResult  `json:"restart"`
	Bump      *BumpResult    `json:"bump,omitempty"`
	Errors    []string       `json:"errors,omitempty"`
}

// ConvergeResult: from the first create until every Etcd reports its generation observed.
type ConvergeResult struct {
	CreateSeconds float64 `json:"createSeconds"`
	Seconds       float64 `json:"seconds"`
	TimedOut      bool    `json:"timedOut,omitempty"`
	// Converged Etcds when the phase ended (all of them unless it timed out).
	Converged      int     `json:"converged"`
	WithLastErrors int     `json:"etcdsWithLastErrors"`
	SettledSeconds float64 `json:"settledSeconds"`
	// Quiet: no Etcd changed for quietWindow before the manager was stopped, so the restart
	// starts from a fleet with nothing left to write. A binary that rewrites status on every
	// resync never gets there; its restart starts after quietLimit anyway.
	Quiet bool `json:"quiet"`
	// LateEtcds were written after the fleet had settled by the earlier criterion alone (every
	// pod created, the etcd controller idle) and before it was quiet, with the fields written:
	// the writes a restart at that moment would have found still to do.
	LateEtcds  int            `json:"lateEtcds"`
	LateFields map[string]int `json:"lateFields,omitempty"`
}

// RestartResult: a restart with nothing to change.
type RestartResult struct {
	// Seconds from the new process's start until every controller's queue has taken in the
	// fleet, is empty and has no reconcile running.
	Seconds  float64 `json:"seconds"`
	TimedOut bool    `json:"timedOut,omitempty"`
	// Requests are the apiserver's counts over the restart, less the idle rate measured with no
	// manager running (the apiserver's and controller-manager's own background requests).
	Requests []RequestCount `json:"requests"`
	// Writes and Reads sum Requests (WATCH excluded from reads); the benchmark's own metric
	// scrapes (tokenreviews, subjectaccessreviews) are excluded from both.
	Writes float64 `json:"writes"`
	Reads  float64 `json:"reads"`
	// ManagerWrites are the write requests the manager itself sent over the restart
	// (client-go's rest_client_requests_total, POST/PUT/PATCH/DELETE, from its own metrics), less
	// the TokenReviews and SubjectAccessReviews it sends to authorize the benchmark's scrapes:
	// exact where Writes, the apiserver's count less an idle rate, can be off by a background
	// write (the apiserver's own Lease renewals) either way.
	ManagerWrites float64   `json:"managerWrites"`
	Proc          ProcStats `json:"proc"`
	// Goroutines and MemberClients at the end of the restart; MemberClients is nil for a binary
	// without the etcd_conductor_member_clients gauge.
	Goroutines    float64  `json:"goroutines"`
	MemberClients *float64 `json:"memberClients,omitempty"`
	// Reconciles per controller over the restart.
	Reconciles map[string]ReconcileStats `json:"reconciles"`
	// Reconcile times of all controllers together, from the manager's start until every
	// controller has reconciled every Etcd once (the restart's burst).
	AllReconciles ReconcileStats `json:"allReconciles"`
	// Steady: the reconciles of the SteadyWindow after that (periodic resyncs of a fleet with
	// nothing to do), all controllers, and per controller.
	Steady           ReconcileStats            `json:"steady"`
	SteadyReconciles map[string]ReconcileStats `json:"steadyReconciles,omitempty"`
	SteadySeconds    float64                   `json:"steadySeconds"`
	// ChangedEtcds is how many Etcds were written during the restart; Changes the first
	// maxChanges writes with the fields each changed, ChangedFields how often each field path
	// changed (over all writes).
	ChangedEtcds  int            `json:"changedEtcds"`
	Changes       []EtcdChange   `json:"changes,omitempty"`
	ChangedFields map[string]int `json:"changedFields,omitempty"`
}

// RequestCount is one verb+resource over a restart.
type RequestCount struct {
	RequestKey
	Count float64 `json:"count"`
}

// ReconcileStats are from controller_runtime_reconcile_time_seconds and _total.
type ReconcileStats struct {
	Count       float64 `json:"count"`
	Errors      float64 `json:"errors"`
	MeanSeconds float64 `json:"meanSeconds"`
	P50Seconds  float64 `json:"p50Seconds"`
	P99Seconds  float64 `json:"p99Seconds"`
	// Within100ms is the share of reconciles that took at most 100 ms: exact, 0.1 s being one
	// of the histogram's bucket bounds, where P50/P99 are interpolated within a bucket
	// (controller-runtime's buckets: 5, 10, 25, 50, 100, 150, 200, 250 ms, ...).
	Within100ms float64 `json:"within100ms"`
}

// BumpResult: one Etcd's image changed while the restarted manager's queues held the fleet.
type BumpResult struct {
	Etcd string `json:"etcd"`
	// QueueDepth of the etcd controller when the change was made.
	QueueDepth float64 `json:"queueDepth"`
	// ActedSeconds from the change until the StatefulSet carried the new image.
	ActedSeconds float64 `json:"actedSeconds"`
	TimedOut     bool    `json:"timedOut,omitempty"`
}

const (
	benchNamespace = "fleetbench"
	secretsName    = "fleet" // every Etcd of a namespace shares one PKI: no member runs
	etcdVersion    = "3.6.8"
	bumpVersion    = "3.7.3"
	pollEvery      = 500 * time.Millisecond
	// quietWindow: the fleet counts as settled once no Etcd has changed for this long (more
	// than the status controller's 5 s resync); quietLimit bounds the wait for it.
	quietWindow = 6 * time.Second
	quietLimit  = time.Minute
	maxChanges  = 50
)

// Run measures one binary on a fresh control plane.
func Run(ctx context.Context, bin Binary, o Options) (res Result, _ error) {
	o = o.withDefaults()
	res = Result{Binary: bin, N: o.N, Replicas: o.Replicas, Pods: !o.NoControllerManager, LoadStart: report.LoadAverage()}
	// Also for a run that ends early (a fleet that did not converge): the load it ended at.
	defer func() { res.LoadEnd = report.LoadAverage() }()
	logf := func(format string, args ...any) {
		fmt.Fprintf(o.Log, "%s [%s N=%d] %s\n", time.Now().UTC().Format("15:04:05"), bin.Label, o.N, fmt.Sprintf(format, args...))
	}
	workDir := filepath.Join(o.WorkDir, fmt.Sprintf("%s-n%d", bin.Label, o.N))
	if err := os.MkdirAll(workDir, 0o755); err != nil {
		return res, err
	}
	lc := localcluster.Options{
		WorkDir:             filepath.Join(workDir, "cluster"),
		ServiceCIDR:         o.ServiceCIDR,
		CRDs:                true,
		NoControllerManager: o.NoControllerManager,
		// Only what the pods of a StatefulSet need: the default ServiceAccount and its CA bundle.
		Controllers: []string{"statefulset", "serviceaccount", "root-ca-certificate-publisher"},
	}
	cluster, err := localcluster.Start(ctx, lc)
	if err != nil {
		return res, fmt.Errorf("starting the control plane: %w", err)
	}
	defer func() {
		if err := cluster.Stop(); err != nil {
			logf("stopping the control plane: %v", err)
		}
	}()
	b := &bench{o: o, bin: bin, cluster: cluster, logf: logf}
	if err := b.prepare(ctx); err != nil {
		return res, err
	}
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	if b.watch, err = watchEtcds(watchCtx, cluster.RESTConfig()); err != nil {
		return res, err
	}
	cfg := managerConfig{binary: bin, kubeconfig: cluster.KubeconfigPath(), workDir: workDir,
		featureGates: o.FeatureGates, extraConfig: o.ExtraConfig[bin.Label], scraperToken: b.scraperToken}
	b.cfg = cfg

	m, err := b.start(ctx, 1)
	if err != nil {
		return res, err
	}
	res.Converge, err = b.converge(ctx, m)
	if err != nil {
		_ = m.stop()
		return res, err
	}
	logf("converged in %.1fs (creating took %.1fs), settled after %.1fs (quiet: %t; %d Etcds written after pods and etcd queue had settled: %v)",
		res.Converge.Seconds, res.Converge.CreateSeconds, res.Converge.SettledSeconds, res.Converge.Quiet, res.Converge.LateEtcds, res.Converge.LateFields)
	if err := m.stop(); err != nil {
		return res, fmt.Errorf("stopping the manager: %w", err)
	}

	res.Restart, err = b.quietRestart(ctx)
	if err != nil {
		return res, err
	}
	logf("restart: all reconciled after %.1fs, %.0f writes, %.0f reads, RSS %d MB, CPU %.1fs, %d Etcds written, p99 %.1f ms (steady %.1f ms)",
		res.Restart.Seconds, res.Restart.Writes, res.Restart.Reads, res.Restart.Proc.RSSBytes>>20, res.Restart.Proc.CPUSeconds,
		res.Restart.ChangedEtcds, res.Restart.AllReconciles.P99Seconds*1000, res.Restart.Steady.P99Seconds*1000)
	for _, c := range res.Restart.Changes {
		logf("  written during the restart: %s at %.1fs: %s", c.Etcd, c.Seconds, strings.Join(c.Fields, "; "))
	}
	if o.Bump {
		bump, err := b.bumpRestart(ctx)
		if err != nil {
			return res, err
		}
		res.Bump = &bump
		logf("bump during restart: acted on after %.1fs (queue depth %.0f at the change)", bump.ActedSeconds, bump.QueueDepth)
	}
	return res, nil
}

// bench is one binary's run.
type bench struct {
	o            Options
	bin          Binary
	cluster      *localcluster.Cluster
	cfg          managerConfig
	watch        *etcdWatch
	scraperToken string
	namespaces   []string
	etcds        []client.ObjectKey
	logf         func(string, ...any)
	runs         int
}

// prepare makes the scraper identity (a ServiceAccount bound to GET /metrics), the namespaces and
// their shared TLS Secrets.
func (b *bench) prepare(ctx context.Context) error {
	c := b.cluster.Client()
	token, err := createScraper(ctx, b.cluster)
	if err != nil {
		return err
	}
	b.scraperToken = token
	pki, err := testpki.NewEtcdPKI(secretsName, benchNamespace)
	if err != nil {
		return fmt.Errorf("generating PKI: %w", err)
	}
	for i := 0; i*b.o.PerNamespace < b.o.N; i++ {
		ns, err := framework.CreateNamespace(ctx, c, fmt.Sprintf("fleet-%03d", i), nil)
		if err != nil {
			return err
		}
		b.namespaces = append(b.namespaces, ns)
		for _, s := range pki.Secrets(ns, testpki.DefaultSecretNames(secretsName)) {
			if err := c.Create(ctx, s); err != nil {
				return fmt.Errorf("creating Secret %s/%s: %w", ns, s.Name, err)
			}
		}
	}
	for i := range b.o.N {
		b.etcds = append(b.etcds, client.ObjectKey{Namespace: b.namespaces[i/b.o.PerNamespace], Name: fmt.Sprintf("etcd-%04d", i)})
	}
	return nil
}

// createScraper makes the identity that reads the managers' /metrics: a ServiceAccount in the
// bench namespace bound to GET /metrics. It returns its token.
func createScraper(ctx context.Context, cluster *localcluster.Cluster) (string, error) {
	c := cluster.Client()
	if _, err := framework.CreateNamespace(ctx, c, benchNamespace, nil); err != nil {
		return "", err
	}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "fleetbench-metrics-reader"},
		Rules: []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "fleetbench-metrics-reader"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "scraper", Namespace: benchNamespace}}}
	for _, obj := range []client.Object{role, binding} {
		if err := c.Create(ctx, obj); err != nil {
			return "", fmt.Errorf("creating %T: %w", obj, err)
		}
	}
	sa, err := localcluster.ServiceAccountConfig(ctx, cluster.RESTConfig(), benchNamespace, "scraper")
	if err != nil {
		return "", err
	}
	return sa.BearerToken, nil
}

// start runs the manager and waits until its metrics answer.
func (b *bench) start(ctx context.Context, run int) (*manager, error) {
	m, err := startManager(b.cfg, run)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if err := m.alive(); err != nil {
			return nil, err
		}
		if _, err := m.scrape(ctx); err == nil {
			return m, nil
		} else if time.Now().After(deadline) {
			_ = m.stop()
			return nil, fmt.Errorf("manager metrics did not answer within 2m: %w", err)
		}
		if err := sleep(ctx, 200*time.Millisecond); err != nil {
			return nil, err
		}
	}
}

// fleetEtcd is framework.NewEtcd with the namespace's shared Secrets.
func fleetEtcd(key client.ObjectKey, replicas int32) *druidv1alpha1.Etcd {
	e := framework.NewEtcd(key.Namespace, key.Name, replicas, framework.EtcdImage(etcdVersion))
	names := testpki.DefaultSecretNames(secretsName)
	for _, t := range []*druidv1alpha1.TLSConfig{e.Spec.Etcd.ClientUrlTLS, e.Spec.Etcd.PeerUrlTLS.TLS()} {
		t.TLSCASecretRef.Name = names.CA
		t.ClientTLSSecretRef.Name = names.Client
	}
	e.Spec.Etcd.ClientUrlTLS.ServerTLSSecretRef.Name = names.Server
	e.Spec.Etcd.PeerUrlTLS.ServerTLSSecretRef.Name = names.Peer
	return e
}

// converge creates the fleet with the manager running and waits until every Etcd has its
// generation observed and conditions written, then until the fleet is settled (every pod
// created, the manager's queues idle) so the restart starts from rest.
func (b *bench) converge(ctx context.Context, m *manager) (ConvergeResult, error) {
	var r ConvergeResult
	c := b.cluster.Client()
	start := time.Now()
	work := make(chan client.ObjectKey)
	errs := make(chan error, len(b.etcds))
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for key := range work {
				if err := c.Create(ctx, fleetEtcd(key, b.o.Replicas)); err != nil {
					errs <- fmt.Errorf("creating Etcd %s: %w", key, err)
				}
			}
		}()
	}
	for _, key := range b.etcds {
		work <- key
	}
	close(work)
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return r, err
	}
	r.CreateSeconds = time.Since(start).Seconds()
	deadline := start.Add(b.o.ConvergeTimeout)
	for {
		if err := m.alive(); err != nil {
			return r, err
		}
		done, withErrors, err := b.converged(ctx)
		if err != nil {
			return r, err
		}
		r.Converged = done
		if done == len(b.etcds) {
			r.Seconds = time.Since(start).Seconds()
			r.WithLastErrors = withErrors
			break
		}
		if time.Now().After(deadline) {
			r.TimedOut, r.Seconds = true, time.Since(start).Seconds()
			return r, fmt.Errorf("%d of %d Etcds converged within %s", done, len(b.etcds), b.o.ConvergeTimeout)
		}
		if err := sleep(ctx, time.Second); err != nil {
			return r, err
		}
	}
	if err := b.settle(ctx, m, deadline); err != nil {
		return r, err
	}
	b.watch.record(time.Now())
	r.Quiet = b.waitQuiet(ctx, m)
	r.LateEtcds, r.LateFields = summarizeChanges(b.watch.stopRecording())
	r.SettledSeconds = time.Since(start).Seconds()
	return r, nil
}

// converged counts the Etcds whose status says the current generation was reconciled and whose
// status controller wrote conditions, and those that carry lastErrors.
func (b *bench) converged(ctx context.Context) (done, withErrors int, err error) {
	var list druidv1alpha1.EtcdList
	if err := b.cluster.Client().List(ctx, &list); err != nil {
		return 0, 0, fmt.Errorf("listing Etcds: %w", err)
	}
	for _, e := range list.Items {
		s := e.Status
		if s.ObservedGeneration != nil && *s.ObservedGeneration == e.Generation && len(s.Conditions) > 0 {
			done++
		}
		if len(s.LastErrors) > 0 {
			withErrors++
		}
	}
	return done, withErrors, nil
}

// settle waits until kube-controller-manager has created every pod and the etcd controller (the
// one that writes the objects; it has no periodic resync) has been idle for two consecutive
// scrapes. The status, membership and defrag controllers resync on a timer by design, so their
// queues are never idle for long; they are not waited for.
func (b *bench) settle(ctx context.Context, m *manager, deadline time.Time) error {
	want := 0
	if !b.o.NoControllerManager {
		want = len(b.etcds) * int(b.o.Replicas)
	}
	idle := 0
	for {
		if err := m.alive(); err != nil {
			return err
		}
		pods, err := b.cluster.Clientset().CoreV1().Pods("").List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			return fmt.Errorf("listing pods: %w", err)
		}
		s, err := m.scrape(ctx)
		if err != nil {
			return err
		}
		if len(pods.Items) >= want && queueIdle(s, "etcd") {
			idle++
		} else {
			idle = 0
		}
		if idle >= 2 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("fleet did not settle: %d of %d pods, etcd queue idle: %t", len(pods.Items), want, queueIdle(s, "etcd"))
		}
		if err := sleep(ctx, pollEvery); err != nil {
			return err
		}
	}
}

// waitQuiet waits, up to quietLimit, until no Etcd has changed for quietWindow: a cluster the
// manager has not finished writing when it is stopped would be written again after the restart,
// and that write is catching up, not a no-op's cost.
func (b *bench) waitQuiet(ctx context.Context, m *manager) bool {
	deadline := time.Now().Add(quietLimit)
	for time.Now().Before(deadline) {
		if m.alive() != nil {
			return false
		}
		if b.watch.quietFor() >= quietWindow {
			return true
		}
		if sleep(ctx, pollEvery) != nil {
			return false
		}
	}
	b.logf("Etcds still changing %s after the fleet converged: restarting anyway", quietLimit)
	return false
}

// controllers the manager registered (from controller_runtime_active_workers).
func controllers(s Scrape) []string {
	return s.LabelValues("controller_runtime_active_workers", "controller")
}

// queueIdle: the controller's queue is empty and no reconcile of it runs.
func queueIdle(s Scrape, controller string) bool {
	if _, found := s.Sum("workqueue_depth", map[string]string{"name": controller}); !found {
		return false
	}
	depth, _ := s.Sum("workqueue_depth", map[string]string{"name": controller})
	active, _ := s.Sum("controller_runtime_active_workers", map[string]string{"controller": controller})
	return depth == 0 && active == 0
}

// fleetKeyed are the controllers that get one work item per Etcd (or per its StatefulSet) from
// their informers' initial events when they start.
var fleetKeyed = []string{"etcd", "etcd-status", "membership", "defrag", "ondelete"}

// reconcileTracker decides from a restarted manager's own metrics when every fleet-keyed
// controller has reconciled every Etcd once. A controller's initial events are all queued once
// its workqueue_adds_total reaches n (informers replay their store to a new handler at once);
// the adds counted at that scrape (A) include every initial item. Items leave the queue in the
// order they were added (a FIFO; controller-runtime's priority queue keeps an item's priority on
// requeue, so the initial items, all of one priority, keep their order too), so once
// controller_runtime_reconcile_total reaches A every initial item has been reconciled. Periodic
// resyncs (the status controller's every 5 s) keep the queues busy forever, so "queue empty"
// would never say it; writes would not either, since a no-op reconcile makes none.
type reconcileTracker struct {
	n       int
	include map[string]bool
	// queued holds A per controller once its initial events are queued.
	queued map[string]float64
}

func newReconcileTracker(n int, onDelete bool) *reconcileTracker {
	t := &reconcileTracker{n: n, include: map[string]bool{}, queued: map[string]float64{}}
	for _, c := range fleetKeyed {
		t.include[c] = c != "ondelete" || onDelete
	}
	return t
}

// done takes one scrape and reports whether every fleet-keyed controller the manager runs has
// reconciled its initial items.
func (t *reconcileTracker) done(s Scrape) bool {
	names := controllers(s)
	if len(names) == 0 {
		return false
	}
	all := true
	for _, c := range names {
		if !t.include[c] {
			continue
		}
		adds, _ := s.Sum("workqueue_adds_total", map[string]string{"name": c})
		if _, ok := t.queued[c]; !ok && adds >= float64(t.n) {
			t.queued[c] = adds
		}
		a, ok := t.queued[c]
		if !ok {
			all = false
			continue
		}
		if reconciled, _ := s.Sum("controller_runtime_reconcile_total", map[string]string{"controller": c}); reconciled < a {
			all = false
		}
	}
	return all
}

// quietRestart measures a restart with nothing to change.
func (b *bench) quietRestart(ctx context.Context) (RestartResult, error) {
	var r RestartResult
	// The apiserver and controller-manager make background requests (leases, the apiserver's
	// own controllers); their rate with no manager running is taken off the restart's counts.
	idleWindow := 10 * time.Second
	idle0, err := b.apiserverRequests(ctx)
	if err != nil {
		return r, err
	}
	if err := sleep(ctx, idleWindow); err != nil {
		return r, err
	}
	idle1, err := b.apiserverRequests(ctx)
	if err != nil {
		return r, err
	}
	idleRate := RequestDelta(idle0, idle1)

	before := idle1
	b.runs++
	m, err := startManager(b.cfg, b.runs+1)
	if err != nil {
		return r, err
	}
	defer func() { _ = m.stop() }()
	b.watch.record(m.started)
	tracker := newReconcileTracker(len(b.etcds), b.o.FeatureGates["QuorumAwareUpdatesWithOnDelete"])
	var last Scrape
	for {
		if err := m.alive(); err != nil {
			return r, err
		}
		s, err := m.scrape(ctx)
		if err == nil {
			last = s
			if tracker.done(s) {
				r.Seconds = time.Since(m.started).Seconds()
				break
			}
		}
		if time.Since(m.started) > b.o.RestartTimeout {
			r.TimedOut, r.Seconds = true, time.Since(m.started).Seconds()
			if last == nil {
				return r, fmt.Errorf("manager metrics never answered: %w", err)
			}
			break
		}
		if err := sleep(ctx, pollEvery); err != nil {
			return r, err
		}
	}
	after, err := b.apiserverRequests(ctx)
	if err != nil {
		return r, err
	}
	if r.Proc, err = procStats(m.proc.PID()); err != nil {
		return r, err
	}
	elapsed := r.Seconds
	for k, v := range RequestDelta(before, after) {
		v -= idleRate[k] * elapsed / idleWindow.Seconds()
		if v < 0.5 {
			continue
		}
		r.Requests = append(r.Requests, RequestCount{RequestKey: k, Count: v})
		switch {
		case scrapeCost(k):
		case k.IsWrite():
			r.Writes += v
		case k.Verb != "WATCH":
			r.Reads += v
		}
	}
	sort.Slice(r.Requests, func(i, j int) bool { return r.Requests[i].Count > r.Requests[j].Count })
	for _, method := range []string{"POST", "PUT", "PATCH", "DELETE"} {
		v, _ := last.Sum("rest_client_requests_total", map[string]string{"method": method})
		r.ManagerWrites += v
	}
	for k, v := range RequestDelta(before, after) {
		if scrapeCost(k) {
			r.ManagerWrites -= v
		}
	}
	r.ManagerWrites = max(r.ManagerWrites, 0)
	r.Goroutines, _ = last.Sum("go_goroutines", nil)
	if v, ok := last.Sum("etcd_conductor_member_clients", nil); ok {
		r.MemberClients = ptr.To(v)
	}
	r.Reconciles = map[string]ReconcileStats{}
	for _, c := range controllers(last) {
		r.Reconciles[c] = reconcileStats(last, map[string]string{"controller": c})
	}
	r.AllReconciles = reconcileStats(last, nil)
	changes := b.watch.stopRecording()
	r.ChangedEtcds, r.ChangedFields = summarizeChanges(changes)
	r.Changes = changes[:min(len(changes), maxChanges)]
	if !r.TimedOut {
		b.measureSteady(ctx, m, last, &r)
	}
	return r, nil
}

// measureSteady scrapes the manager again SteadyWindow after the restart's burst: the reconciles
// in between are the periodic checks of a settled fleet.
func (b *bench) measureSteady(ctx context.Context, m *manager, burst Scrape, r *RestartResult) {
	from := time.Now()
	if sleep(ctx, b.o.SteadyWindow) != nil || m.alive() != nil {
		return
	}
	s, err := m.scrape(ctx)
	if err != nil {
		b.logf("steady-state scrape: %v", err)
		return
	}
	r.SteadySeconds = time.Since(from).Seconds()
	r.Steady = reconcileStatsBetween(burst, s, nil)
	r.SteadyReconciles = map[string]ReconcileStats{}
	for _, c := range controllers(s) {
		r.SteadyReconciles[c] = reconcileStatsBetween(burst, s, map[string]string{"controller": c})
	}
}

// scrapeCost are the requests the benchmark's scrapes of the manager cause (the manager asks the
// apiserver to review the scraper's token and its right to GET /metrics).
func scrapeCost(k RequestKey) bool {
	return k.Resource == "tokenreviews" || k.Resource == "subjectaccessreviews"
}

func reconcileStats(s Scrape, want map[string]string) ReconcileStats {
	return reconcileStatsBetween(nil, s, want)
}

// reconcileStatsBetween are the reconciles between two scrapes of one manager (from nil: since
// it started).
func reconcileStatsBetween(from, to Scrape, want map[string]string) ReconcileStats {
	var r ReconcileStats
	errLabels := map[string]string{"result": "error"}
	for k, v := range want {
		errLabels[k] = v
	}
	total, _ := to.Sum("controller_runtime_reconcile_total", want)
	errs, _ := to.Sum("controller_runtime_reconcile_total", errLabels)
	h, ok := to.Histogram("controller_runtime_reconcile_time_seconds", want)
	if from != nil {
		t0, _ := from.Sum("controller_runtime_reconcile_total", want)
		e0, _ := from.Sum("controller_runtime_reconcile_total", errLabels)
		total, errs = total-t0, errs-e0
		if h0, ok0 := from.Histogram("controller_runtime_reconcile_time_seconds", want); ok && ok0 {
			h = h.Minus(h0)
		}
	}
	r.Count, r.Errors = total, errs
	if ok && h.Count > 0 {
		r.MeanSeconds = h.Sum / h.Count
		r.P50Seconds = finite(h.Quantile(0.5))
		r.P99Seconds = finite(h.Quantile(0.99))
		r.Within100ms = h.ShareAtMost(0.1)
	}
	return r
}

// bumpRestart restarts the manager again and, as soon as its etcd controller has queued the
// fleet, changes one Etcd's image: the time until its StatefulSet carries the new image is how
// long a cluster that needs action waits behind a restart.
func (b *bench) bumpRestart(ctx context.Context) (BumpResult, error) {
	key := b.etcds[len(b.etcds)-1]
	r := BumpResult{Etcd: key.String()}
	b.runs++
	m, err := startManager(b.cfg, b.runs+1)
	if err != nil {
		return r, err
	}
	defer func() { _ = m.stop() }()
	for {
		if err := m.alive(); err != nil {
			return r, err
		}
		if s, err := m.scrape(ctx); err == nil {
			if adds, _ := s.Sum("workqueue_adds_total", map[string]string{"name": "etcd"}); adds >= float64(len(b.etcds)) {
				r.QueueDepth, _ = s.Sum("workqueue_depth", map[string]string{"name": "etcd"})
				break
			}
		}
		if time.Since(m.started) > b.o.RestartTimeout {
			return r, errors.New("the restarted manager's etcd controller never queued the fleet")
		}
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return r, err
		}
	}
	c := b.cluster.Client()
	etcd := &druidv1alpha1.Etcd{}
	if err := c.Get(ctx, key, etcd); err != nil {
		return r, err
	}
	image := framework.EtcdImage(bumpVersion)
	if err := framework.SetEtcdImage(ctx, c, etcd, image); err != nil {
		return r, err
	}
	changed := time.Now()
	kube := b.cluster.Clientset()
	for {
		if err := m.alive(); err != nil {
			return r, err
		}
		ok, err := stsHasImage(ctx, kube, key, image)
		if err != nil {
			return r, err
		}
		if ok {
			r.ActedSeconds = time.Since(changed).Seconds()
			return r, nil
		}
		if time.Since(changed) > b.o.RestartTimeout {
			r.TimedOut, r.ActedSeconds = true, time.Since(changed).Seconds()
			return r, nil
		}
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return r, err
		}
	}
}

func stsHasImage(ctx context.Context, kube kubernetes.Interface, key client.ObjectKey, image string) (bool, error) {
	sts, err := kube.AppsV1().StatefulSets(key.Namespace).Get(ctx, key.Name, metav1.GetOptions{})
	if err != nil {
		return false, fmt.Errorf("reading StatefulSet %s: %w", key, err)
	}
	return containerImage(sts, resources.EtcdContainerName) == image, nil
}

func containerImage(sts *appsv1.StatefulSet, name string) string {
	for _, c := range sts.Spec.Template.Spec.Containers {
		if c.Name == name {
			return c.Image
		}
	}
	return ""
}

// apiserverRequests scrapes the apiserver's own request counters.
func (b *bench) apiserverRequests(ctx context.Context) (map[RequestKey]float64, error) {
	raw, err := b.cluster.Clientset().Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("scraping kube-apiserver /metrics: %w", err)
	}
	s, err := ParseScrape(strings.NewReader(string(raw)))
	if err != nil {
		return nil, err
	}
	return s.APIRequests(), nil
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// finite maps NaN (no observations) to 0, which JSON can hold.
func finite(v float64) float64 {
	if math.IsNaN(v) {
		return 0
	}
	return v
}
