package integration

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/etcdstatus"
	"github.com/etcd-conductor/etcd-conductor/test/framework"
	"github.com/etcd-conductor/etcd-conductor/test/localcluster"
)

// requestLog records every request an operator sends to the apiserver.
type requestLog struct {
	mu       sync.Mutex
	requests []apiRequest
	// lastWrite is when the last write was sent (zero: none yet).
	lastWrite time.Time
}

type apiRequest struct {
	method string
	url    *url.URL
	body   string
}

func (r apiRequest) String() string {
	return strings.TrimSpace(r.method + " " + r.url.RequestURI() + " " + r.body)
}

// write: anything that changes the apiserver's state.
func (r apiRequest) write() bool { return r.method != http.MethodGet }

// uncachedRead: a GET or LIST no informer sends. Informers only list (with a resourceVersion to
// start from) and watch; a GET of one object or a LIST without resourceVersion is a direct read.
func (r apiRequest) uncachedRead() bool {
	q := r.url.Query()
	return r.method == http.MethodGet && !r.discovery() && !r.startupCheck() && q.Get("watch") != "true" && !q.Has("resourceVersion")
}

// startupCheck: the operator's one look at start whether the member report admission policy and
// its binding are installed (internal/operator/reportauth), so a missing one is logged before a cluster
// needs a restore: two reads per start whatever the number of Etcds, none for any Etcd.
func (r apiRequest) startupCheck() bool {
	for _, kind := range []string{"validatingadmissionpolicies", "validatingadmissionpolicybindings"} {
		if r.url.Path == "/apis/admissionregistration.k8s.io/v1/"+kind+"/"+framework.StackMemberReportPolicy {
			return true
		}
	}
	return false
}

// discovery: what the REST mapper asks about the API (/api, /apis, /apis/<group>/<version>).
func (r apiRequest) discovery() bool {
	parts := strings.Split(strings.Trim(r.url.Path, "/"), "/")
	switch parts[0] {
	case "api":
		return len(parts) <= 2
	case "apis":
		return len(parts) <= 3
	}
	return true
}

func (l *requestLog) wrap(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			r := apiRequest{method: req.Method, url: req.URL}
			if req.Method != http.MethodGet && req.GetBody != nil {
				// The body says what a write would have changed.
				if body, err := req.GetBody(); err == nil {
					data, _ := io.ReadAll(io.LimitReader(body, 2048))
					r.body = string(data)
				}
			}
			l.mu.Lock()
			l.requests = append(l.requests, r)
			if r.write() {
				l.lastWrite = time.Now()
			}
			l.mu.Unlock()
			return rt.RoundTrip(req)
		})
	})
	return cfg
}

// quietFor is how long no write has been sent (since start when none was).
func (l *requestLog) quietFor(start time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lastWrite.IsZero() {
		return time.Since(start)
	}
	return time.Since(l.lastWrite)
}

func (l *requestLog) matching(keep func(apiRequest) bool) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, r := range l.requests {
		if keep(r) {
			out = append(out, r.String())
		}
	}
	return out
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// reconciles reads controller-runtime's reconcile counter of each controller (all operators in
// this process share it).
func reconciles(t *testing.T) map[string]float64 {
	t.Helper()
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		if f.GetName() != "controller_runtime_reconcile_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			out[label(m, "controller")] += m.GetCounter().GetValue()
		}
	}
	return out
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// TestRestartOverSettledEtcdSendsNoWrite: an operator restarted over a settled Etcd (objects
// converged, status written; the pods exist but stay unscheduled, as in a fleet benchmark) goes
// through every controller, more than once where they resync, and sends the apiserver not one
// write and not one uncached read: informers only.
func TestRestartOverSettledEtcdSendsNoWrite(t *testing.T) {
	env := localcluster.StartForTest(t, localcluster.Options{CRDs: true})
	ns := "settled"
	ctx := setup(t, env, ns, "etcd-main")
	first := framework.StartOperator(t, env.RESTConfig(), framework.OperatorOptions{FeatureGates: gate(true)})

	etcd := framework.NewEtcd(ns, "etcd-main", 3, framework.EtcdImage("3.6.8"))
	if err := env.Client().Create(ctx, etcd); err != nil {
		t.Fatal(err)
	}
	waitForPods(t, env.Client(), ns, 3)
	framework.Eventually(t, timeout, "a settled status", func(ctx context.Context) (bool, string) {
		got := &druidv1alpha1.Etcd{}
		if err := env.Client().Get(ctx, client.ObjectKeyFromObject(etcd), got); err != nil {
			return false, err.Error()
		}
		s := got.Status
		// currentReplicas comes from the pods' revisions, written once the StatefulSet controller
		// has labelled them: a restart before that would have one real change to write.
		if s.ObservedGeneration == nil || *s.ObservedGeneration != got.Generation || len(s.Members) != 3 || s.CurrentReplicas != 3 ||
			s.LastOperation == nil || s.LastOperation.State != etcdstatus.OperationSucceeded ||
			druidv1alpha1.FindCondition(s.Conditions, druidv1alpha1.ConditionTypeScaleOperationInProgress) == nil {
			return false, fmt.Sprintf("status = %+v", s)
		}
		return true, ""
	})
	if err := first.Stop(); err != nil {
		t.Fatal(err)
	}

	// Every controller goes through the Etcd; the status controller twice (its resync) and the
	// membership controller twice (its poll), so a second pass over settled state is covered.
	log := restartExpectingNoRequests(t, env, "a settled Etcd",
		map[string]float64{"etcd": 1, "ondelete": 1, "etcd-status": 2, "membership": 2})

	// Freshness stays where it is a safety question: once a pod may be deleted (the image bumped,
	// every pod outdated), the OnDelete controller reads the StatefulSet and pods uncached
	// before it deletes one.
	if err := framework.SetEtcdImage(ctx, env.Client(), etcd, framework.EtcdImage("3.7.3")); err != nil {
		t.Fatal(err)
	}
	freshRead := func(r apiRequest) bool {
		return r.uncachedRead() && strings.HasSuffix(r.url.Path, "/statefulsets/etcd-main")
	}
	podDeleted := func(r apiRequest) bool {
		return r.method == http.MethodDelete && strings.Contains(r.url.Path, "/pods/")
	}
	framework.Eventually(t, timeout, "a pod deleted after an uncached read", func(context.Context) (bool, string) {
		reads, deletes := log.matching(freshRead), log.matching(podDeleted)
		return len(reads) > 0 && len(deletes) > 0, fmt.Sprintf("%d uncached StatefulSet reads, %d pod deletions", len(reads), len(deletes))
	})
}

// restartExpectingNoRequests starts an operator (the previous one stopped), waits until each
// controller has reconciled at least want[controller] times, and fails on any write or uncached
// read it sent for what (settled Etcds). It returns the request log for further checks.
func restartExpectingNoRequests(t *testing.T, env *localcluster.Cluster, what string, want map[string]float64) *requestLog {
	t.Helper()
	before := reconciles(t)
	log := &requestLog{}
	framework.StartOperator(t, log.wrap(env.RESTConfig()), framework.OperatorOptions{FeatureGates: gate(true)})
	framework.Eventually(t, timeout, "every controller through every Etcd after the restart", func(context.Context) (bool, string) {
		now := reconciles(t)
		for name, k := range want {
			if now[name]-before[name] < k {
				return false, fmt.Sprintf("%s reconciled %.0f times, want %.0f", name, now[name]-before[name], k)
			}
		}
		return true, ""
	})
	if writes := log.matching(apiRequest.write); len(writes) > 0 {
		t.Errorf("the restarted operator sent %d write(s) for %s, want 0:\n%s", len(writes), what, strings.Join(writes, "\n"))
	}
	if reads := log.matching(apiRequest.uncachedRead); len(reads) > 0 {
		t.Errorf("the restarted operator sent %d uncached read(s) for %s, want 0:\n%s", len(reads), what, strings.Join(reads, "\n"))
	}
	return log
}

// TestRestartOverPendingFleetSendsNoWrite: the fleet benchmark's layout (several Etcds in one
// namespace, their pods created by the StatefulSet controller and left Pending: no kubelet), with
// the first operator run until it has sent nothing for longer than any controller's resync. A
// restart then reconciles every Etcd, each controller more than once where it resyncs, and sends
// not one write: what the first operator left is exactly what the second computes. Writes a
// restart makes while the first had not finished (pods created late, a status not yet caught
// up) are real changes, not a no-op's cost; waiting for quiet keeps them out of the count, as the
// benchmark does.
func TestRestartOverPendingFleetSendsNoWrite(t *testing.T) {
	env := localcluster.StartForTest(t, localcluster.Options{CRDs: true})
	const ns, n = "pending-fleet", 3
	ctx := setup(t, env, ns, "etcd-0")
	firstLog := &requestLog{}
	started := time.Now()
	first := framework.StartOperator(t, firstLog.wrap(env.RESTConfig()), framework.OperatorOptions{FeatureGates: gate(true)})
	for i := range n {
		name := fmt.Sprintf("etcd-%d", i)
		if i > 0 {
			if _, err := framework.CreateTLSSecrets(ctx, env.Client(), ns, name); err != nil {
				t.Fatal(err)
			}
		}
		if err := env.Client().Create(ctx, framework.NewEtcd(ns, name, 3, framework.EtcdImage("3.6.8"))); err != nil {
			t.Fatal(err)
		}
	}
	waitForPods(t, env.Client(), ns, 3*n)
	// Longer than the status controller's resync (5 s) and the membership poll of a cluster
	// without member addresses (15 s): any write still to come has come.
	const quiet = 16 * time.Second
	framework.Eventually(t, 2*timeout, "the first operator quiet", func(ctx context.Context) (bool, string) {
		var list druidv1alpha1.EtcdList
		if err := env.Client().List(ctx, &list, client.InNamespace(ns)); err != nil {
			return false, err.Error()
		}
		for _, e := range list.Items {
			s := e.Status
			if s.ObservedGeneration == nil || len(s.Members) != 3 || s.LastOperation == nil {
				return false, fmt.Sprintf("%s not converged: %+v", e.Name, s)
			}
		}
		q := firstLog.quietFor(started)
		return q >= quiet, fmt.Sprintf("last write %s ago", q.Round(time.Second))
	})
	if err := first.Stop(); err != nil {
		t.Fatal(err)
	}

	restartExpectingNoRequests(t, env, fmt.Sprintf("%d settled Etcds with Pending pods", n),
		map[string]float64{"etcd": n, "ondelete": n, "recovery": n, "etcd-status": 2 * n, "membership": n})
}
