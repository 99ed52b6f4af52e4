package fleet

import (
	"bytes"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/etcd-conductor/etcd-conductor/test/localcluster"
)

// The fleet benchmark's smallest run, kept in `make test` so the benchmark cannot rot: 20 Etcds
// with the current tree's manager, creation to convergence, a quiet restart and a restart with
// an image bump. It checks that every figure was measured, not how good it is (that is the
// benchmark's job, on a quiet machine).
func TestFleetSmoke(t *testing.T) {
	binDir, err := localcluster.DefaultBinDir()
	if err != nil {
		t.Fatal(err)
	}
	localcluster.SkipWithoutBinaries(t, binDir)
	bin, err := CurrentBinary("after")
	if err != nil {
		t.Fatal(err)
	}
	const n = 20
	var log bytes.Buffer
	res, err := Run(t.Context(), bin, Options{
		N: n, Bump: true, WorkDir: t.TempDir(), Log: &log,
		FeatureGates:    map[string]bool{"QuorumAwareUpdatesWithOnDelete": true},
		ConvergeTimeout: 5 * time.Minute, RestartTimeout: 3 * time.Minute, SteadyWindow: 6 * time.Second,
	})
	t.Log(log.String())
	if err != nil {
		t.Fatalf("fleet run: %v", err)
	}
	if res.Converge.TimedOut || res.Converge.Seconds <= 0 {
		t.Errorf("convergence not measured: %+v", res.Converge)
	}
	r := res.Restart
	if r.TimedOut || r.Seconds <= 0 {
		t.Errorf("restart not measured: %.1fs, timed out %t", r.Seconds, r.TimedOut)
	}
	// A settled fleet costs the restarted manager no read that is counted (its informers list
	// through streaming WATCHes), but scraping its metrics costs a TokenReview and a
	// SubjectAccessReview: none counted at all means the counting is broken.
	if len(r.Requests) == 0 {
		t.Errorf("no apiserver requests counted over the restart (scraping the manager's metrics at least authenticates): %+v", r.Requests)
	}
	if r.Proc.RSSBytes == 0 || r.Proc.CPUSeconds == 0 || r.Goroutines == 0 {
		t.Errorf("process figures missing: %+v, goroutines %.0f", r.Proc, r.Goroutines)
	}
	if r.SteadySeconds == 0 || r.Steady.Count == 0 {
		t.Errorf("reconciles after the restart's burst not measured: %.1fs, %+v", r.SteadySeconds, r.Steady)
	}
	if r.MemberClients == nil {
		t.Error("etcd_conductor_member_clients not exported by the current tree's manager")
	}
	if got := r.Reconciles["etcd"].Count; got < n {
		t.Errorf("etcd controller reconciled %.0f times over the restart, want at least %d", got, n)
	}
	if res.Bump == nil || res.Bump.TimedOut || res.Bump.ActedSeconds <= 0 {
		t.Errorf("image bump during the restart not acted on: %+v", res.Bump)
	}
	var md bytes.Buffer
	Report{Binaries: []Binary{bin}, Sizes: []SizeResults{{N: n, Results: []Result{res}}}}.Markdown(&md)
	for _, want := range []string{"restart → all reconciled", "writes per Etcd per restart", "acted on after"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, md.String())
		}
	}
	if testing.Verbose() {
		_, _ = os.Stdout.Write(md.Bytes())
	}
}

func TestQuantile(t *testing.T) {
	inf := math.Inf(1)
	for _, tc := range []struct {
		name string
		h    Histogram
		q    float64
		want float64
	}{
		// 10 observations ≤ 0.1, 10 more ≤ 0.2: the median is the top of the first bucket.
		{"median at a bucket edge", Histogram{Bounds: []float64{0.1, 0.2, inf}, Counts: []float64{10, 20, 20}, Count: 20}, 0.5, 0.1},
		{"interpolated inside a bucket", Histogram{Bounds: []float64{0.1, 0.2, inf}, Counts: []float64{10, 20, 20}, Count: 20}, 0.75, 0.15},
		{"first bucket from zero", Histogram{Bounds: []float64{0.1, inf}, Counts: []float64{4, 4}, Count: 4}, 0.5, 0.05},
		{"rank in +Inf gives the highest finite bound", Histogram{Bounds: []float64{0.1, inf}, Counts: []float64{1, 10}, Count: 10}, 0.99, 0.1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.h.Quantile(tc.q); math.Abs(got-tc.want) > 1e-9 {
				t.Errorf("Quantile(%v) = %v, want %v", tc.q, got, tc.want)
			}
		})
	}
	if got := (Histogram{}).Quantile(0.5); !math.IsNaN(got) {
		t.Errorf("empty histogram: %v, want NaN", got)
	}
}

func scrapeOf(t *testing.T, text string) Scrape {
	t.Helper()
	s, err := ParseScrape(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestReconcileTracker(t *testing.T) {
	metrics := func(adds, reconciled, statusAdds, statusReconciled int) string {
		return strings.Join([]string{
			"# TYPE controller_runtime_active_workers gauge",
			`controller_runtime_active_workers{controller="etcd"} 1`,
			`controller_runtime_active_workers{controller="etcd-status"} 3`,
			"# TYPE workqueue_adds_total counter",
			`workqueue_adds_total{controller="etcd",name="etcd"} ` + itoa(adds),
			`workqueue_adds_total{controller="etcd-status",name="etcd-status"} ` + itoa(statusAdds),
			"# TYPE controller_runtime_reconcile_total counter",
			`controller_runtime_reconcile_total{controller="etcd",result="success"} ` + itoa(reconciled),
			`controller_runtime_reconcile_total{controller="etcd-status",result="success"} ` + itoa(statusReconciled),
			"",
		}, "\n")
	}
	tr := newReconcileTracker(10, false)
	steps := []struct {
		name                                   string
		adds, reconciled, statusAdds, statusRc int
		want                                   bool
	}{
		{"initial events not all queued", 6, 0, 10, 0, false},
		// etcd: all 10 queued (A=12, two of the fleet's objects re-queued an Etcd meanwhile).
		{"queued, not reconciled", 12, 5, 10, 4, false},
		// The status controller's periodic resyncs keep adding; what counts is A from when its
		// initial items were all queued (10), not the adds since.
		{"etcd done, status resyncs still arriving", 14, 12, 25, 9, false},
		{"every initial item reconciled", 14, 13, 40, 10, true},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			if got := tr.done(scrapeOf(t, metrics(st.adds, st.reconciled, st.statusAdds, st.statusRc))); got != st.want {
				t.Errorf("done = %t, want %t (queued: %v)", got, st.want, tr.queued)
			}
		})
	}
}

func itoa(v int) string { return strconv.Itoa(v) }

func TestRequestDeltaAndWrites(t *testing.T) {
	before := scrapeOf(t, "# TYPE apiserver_request_total counter\n"+
		`apiserver_request_total{verb="PUT",resource="statefulsets",subresource="",code="200"} 5`+"\n"+
		`apiserver_request_total{verb="PATCH",resource="etcds",subresource="status",code="200"} 1`+"\n")
	after := scrapeOf(t, "# TYPE apiserver_request_total counter\n"+
		`apiserver_request_total{verb="PUT",resource="statefulsets",subresource="",code="200"} 5`+"\n"+
		`apiserver_request_total{verb="PATCH",resource="etcds",subresource="status",code="200"} 4`+"\n"+
		`apiserver_request_total{verb="PATCH",resource="etcds",subresource="status",code="409"} 1`+"\n"+
		`apiserver_request_total{verb="GET",resource="",subresource="",code="200"} 7`+"\n")
	got := RequestDelta(before.APIRequests(), after.APIRequests())
	want := map[RequestKey]float64{{Verb: "PATCH", Resource: "etcds/status"}: 4}
	if len(got) != len(want) || got[RequestKey{Verb: "PATCH", Resource: "etcds/status"}] != 4 {
		t.Errorf("delta = %v, want %v (unchanged keys and non-resource requests left out)", got, want)
	}
	if !(RequestKey{Verb: "PATCH"}).IsWrite() || (RequestKey{Verb: "WATCH"}).IsWrite() {
		t.Error("IsWrite misclassifies")
	}
}
