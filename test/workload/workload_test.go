package workload_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/etcd-conductor/etcd-conductor/etcdclient/etcdtest"
	"github.com/etcd-conductor/etcd-conductor/test/framework"
	"github.com/etcd-conductor/etcd-conductor/test/workload"
)

// startCluster starts a real 3-member mTLS cluster; without the etcd binary the test is
// skipped, except under CI where it must be there.
func startCluster(t *testing.T) *etcdtest.Cluster {
	t.Helper()
	if _, err := etcdtest.EtcdBinary(etcdtest.DefaultVersion); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("etcd binary required under CI=true: %v", err)
		}
		t.Skipf("etcd binary not built: %v", err)
	}
	return etcdtest.Start(t, etcdtest.Config{Members: 3})
}

func endpointsOf(c *etcdtest.Cluster) []workload.Endpoint {
	eps := make([]workload.Endpoint, 0, len(c.Members))
	for _, m := range c.Members {
		t := m.Target()
		eps = append(eps, workload.Endpoint{Name: t.Name, Address: t.Address, ServerName: t.ServerName})
	}
	return eps
}

// clientReadyzURL points the readyz probe at the member's client listener: the test members
// have no separate metrics listener, and this one needs the client certificate.
func clientReadyzURL(ep workload.Endpoint) string { return "https://" + ep.Address + "/readyz" }

// testOptions are tolerant of a loaded test machine: the instruments must not see a quorum
// loss where the cluster had none just because the machine was slow.
func testOptions(probe workload.Probe) workload.RecorderOptions {
	return workload.RecorderOptions{
		Expected: 3,
		Writer:   workload.WriterOptions{Rate: 50},
		Quorum: workload.QuorumOptions{
			Probe:        probe,
			ProbeTimeout: 2 * time.Second,
			ReadyzURL:    clientReadyzURL,
		},
		Leader: workload.LeaderOptions{RequestTimeout: 2 * time.Second},
	}
}

func startRecorder(t *testing.T, c *etcdtest.Cluster, o workload.RecorderOptions) *workload.Recorder {
	t.Helper()
	r, err := workload.NewRecorder(workload.StaticEndpoints(endpointsOf(c)...), c.Client, o)
	if err != nil {
		t.Fatalf("NewRecorder: %v", err)
	}
	if err := r.Start(context.Background()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	return r
}

func stopRecorder(t *testing.T, r *workload.Recorder) workload.Report {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	rep, err := r.Stop(ctx)
	t.Log(rep.Summary())
	if err != nil {
		t.Fatalf("Stop: %v", err)
	}
	return rep
}

// eventually polls cond until it holds; clusters take a moment to fail over and recover.
func eventually(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	framework.Eventually(t, 60*time.Second, what, func(context.Context) (bool, string) { return cond() })
}

func ackedAtLeast(w *workload.Writer, n int) func() (bool, string) {
	return func() (bool, string) {
		s := w.Snapshot()
		return s.AckedWrites >= n, fmt.Sprintf("acked=%d failed=%d", s.AckedWrites, s.FailedWrites)
	}
}

func TestRecorderHealthyCluster(t *testing.T) {
	c := startCluster(t)
	for _, probe := range []workload.Probe{workload.ProbeLinearizableGet, workload.ProbeReadyz} {
		t.Run(string(probe), func(t *testing.T) {
			r := startRecorder(t, c, testOptions(probe))
			eventually(t, "25 acknowledged writes", ackedAtLeast(r.Writer(), 25))
			eventually(t, "a few quorum polls", func() (bool, string) {
				q := r.Quorum().Snapshot()
				return q.Rounds >= 5, fmt.Sprintf("rounds=%d", q.Rounds)
			})
			rep := stopRecorder(t, r)

			if rep.AckedWrites == 0 {
				t.Errorf("no acknowledged writes")
			}
			if rep.LostAckedWrites != 0 {
				t.Errorf("lost %d acknowledged writes: %v", rep.LostAckedWrites, rep.LostKeys)
			}
			if rep.QuorumLossMs != 0 || len(rep.QuorumLosses) != 0 {
				t.Errorf("quorum loss %d ms (%v) on a healthy cluster; participation: %+v", rep.QuorumLossMs, rep.QuorumLosses, rep.Participation)
			}
			if len(rep.DistinctLeaders) == 0 {
				t.Errorf("leader monitor saw no leader")
			}
			for _, p := range rep.Participation {
				if !p.Participating {
					t.Errorf("member %s did not participate at %s: %s %s", p.Member, p.At, p.Class, p.Error)
				}
			}
			if len(rep.WriteLatencies) != rep.AckedWrites {
				t.Errorf("%d latency samples for %d acknowledged writes", len(rep.WriteLatencies), rep.AckedWrites)
			}

			data, err := json.Marshal(rep)
			if err != nil {
				t.Fatalf("marshal report: %v", err)
			}
			for _, field := range []string{"quorumLossMs", "longestWriteGapMs", "failedWrites", "ackedWrites", "lostAckedWrites", "leaderChanges", "termIncrements"} {
				if !strings.Contains(string(data), `"`+field+`":`) {
					t.Errorf("report JSON lacks %q", field)
				}
			}
			if s := rep.Summary(); !strings.Contains(s, "lost=0") {
				t.Errorf("summary %q does not say lost=0", s)
			}
		})
	}
}

func TestRecorderQuorumLossAndRecovery(t *testing.T) {
	for _, probe := range []workload.Probe{workload.ProbeLinearizableGet, workload.ProbeReadyz} {
		t.Run(string(probe), func(t *testing.T) { testQuorumLossAndRecovery(t, probe) })
	}
}

func testQuorumLossAndRecovery(t *testing.T, probe workload.Probe) {
	c := startCluster(t)
	r := startRecorder(t, c, testOptions(probe))
	eventually(t, "10 acknowledged writes", ackedAtLeast(r.Writer(), 10))

	for _, i := range []int{1, 2} {
		if err := c.Kill(i); err != nil {
			t.Fatalf("kill member %d: %v", i, err)
		}
	}
	eventually(t, "the quorum monitor sees the loss", func() (bool, string) {
		q := r.Quorum().Snapshot()
		return q.InLoss, fmt.Sprintf("counts=%+v", q.Counts)
	})
	eventually(t, "writes fail", func() (bool, string) {
		s := r.Writer().Snapshot()
		return s.FailedWrites > 0, fmt.Sprintf("failed=%d", s.FailedWrites)
	})

	for _, i := range []int{1, 2} {
		if err := c.Restart(i); err != nil {
			t.Fatalf("restart member %d: %v", i, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := c.WaitHealthy(ctx); err != nil {
		t.Fatalf("cluster did not recover: %v", err)
	}
	ackedAfterRestart := r.Writer().Snapshot().AckedWrites
	eventually(t, "writes succeed again", ackedAtLeast(r.Writer(), ackedAfterRestart+10))
	eventually(t, "the quorum monitor sees the quorum back", func() (bool, string) {
		q := r.Quorum().Snapshot()
		return !q.InLoss, fmt.Sprintf("counts=%+v", q.Counts)
	})
	rep := stopRecorder(t, r)

	if rep.QuorumLossMs <= 0 || len(rep.QuorumLosses) == 0 {
		t.Errorf("no quorum loss recorded: %d ms, %v", rep.QuorumLossMs, rep.QuorumLosses)
	}
	if rep.FailedWrites == 0 {
		t.Errorf("no failed writes recorded")
	}
	if rep.AckedWrites == 0 {
		t.Errorf("no acknowledged writes")
	}
	if rep.LostAckedWrites != 0 {
		t.Errorf("lost %d acknowledged writes: %v", rep.LostAckedWrites, rep.LostKeys)
	}
	if len(rep.WriteGaps) == 0 {
		t.Errorf("no write gap over %v listed, want the outage (longest gap %d ms)", workload.DefaultGapThreshold, rep.LongestWriteGapMs)
	}
	var sawOut bool
	for _, p := range rep.Participation {
		if !p.Participating {
			sawOut = true
		}
	}
	if !sawOut {
		t.Errorf("participation timeline shows no member dropping out: %+v", rep.Participation)
	}
}

func TestRecorderLeaderKilled(t *testing.T) {
	c := startCluster(t)
	r := startRecorder(t, c, testOptions(workload.ProbeLinearizableGet))
	eventually(t, "10 acknowledged writes", ackedAtLeast(r.Writer(), 10))

	var leader string
	eventually(t, "a leader is observed", func() (bool, string) {
		l := r.LeaderMonitor().Snapshot()
		if n := len(l.Epochs); n > 0 && l.Epochs[n-1].Leader != l.Epochs[n-1].LeaderID {
			leader = l.Epochs[n-1].Leader
			return true, ""
		}
		return false, fmt.Sprintf("epochs=%+v", l.Epochs)
	})
	idx := -1
	for i, m := range c.Members {
		if m.Name == leader {
			idx = i
		}
	}
	if idx < 0 {
		t.Fatalf("leader %q is not a member", leader)
	}
	if err := c.Kill(idx); err != nil {
		t.Fatalf("kill leader %s: %v", leader, err)
	}
	eventually(t, "the leader monitor sees a new leader", func() (bool, string) {
		l := r.LeaderMonitor().Snapshot()
		return l.LeaderChanges > 0, fmt.Sprintf("epochs=%+v", l.Epochs)
	})
	if err := c.Restart(idx); err != nil {
		t.Fatalf("restart %s: %v", leader, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := c.WaitHealthy(ctx); err != nil {
		t.Fatalf("cluster did not recover: %v", err)
	}
	rep := stopRecorder(t, r)

	if rep.LeaderChanges == 0 {
		t.Errorf("no leader change recorded: %+v", rep.LeaderEpochs)
	}
	if rep.TermIncrements == 0 {
		t.Errorf("no term increment recorded: %+v", rep.LeaderEpochs)
	}
	if len(rep.DistinctLeaders) < 2 {
		t.Errorf("distinct leaders %v, want the killed one and its successor", rep.DistinctLeaders)
	}
	if rep.LostAckedWrites != 0 {
		t.Errorf("lost %d acknowledged writes: %v", rep.LostAckedWrites, rep.LostKeys)
	}
}

// The audit must be able to fail: a key acknowledged but never written, and one whose stored
// value differs from the acknowledged one, are both reported.
func TestVerifyAcknowledgedReportsMissingAndChangedKeys(t *testing.T) {
	c := startCluster(t)
	eps := endpointsOf(c)
	w := workload.NewWriter(workload.StaticEndpoints(eps...), c.Client, workload.WriterOptions{})
	if err := w.Start(context.Background()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	eventually(t, "5 acknowledged writes", func() (bool, string) {
		s := w.Snapshot()
		return s.AckedWrites >= 5, fmt.Sprintf("acked=%d", s.AckedWrites)
	})
	res := w.Stop(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	lost, err := workload.VerifyAcknowledged(ctx, eps, c.Client, res)
	if err != nil || len(lost) != 0 {
		t.Fatalf("untouched run: lost %v, err %v", lost, err)
	}

	missing := res.Prefix + "999999999999"
	changed := res.Acked[0].Key
	res.Acked = append(res.Acked, workload.AckedWrite{Seq: 999999999999, Key: missing, Value: "never written"})
	res.Acked[0].Value = "not what was written"
	lost, err = workload.VerifyAcknowledged(ctx, eps, c.Client, res)
	if err != nil {
		t.Fatalf("VerifyAcknowledged: %v", err)
	}
	want := map[string]bool{missing: true, changed: true}
	if len(lost) != len(want) || !want[lost[0]] || !want[lost[1]] {
		t.Errorf("lost %v, want %s and %s", lost, changed, missing)
	}
}

// The writer follows the endpoints function: a member first listed at a dead address is
// written through once its address is corrected.
func TestWriterFollowsEndpointChanges(t *testing.T) {
	c := startCluster(t)
	good := endpointsOf(c)[0]
	bad := good
	bad.Address = "127.0.0.1:1"

	var current atomicEndpoints
	current.set([]workload.Endpoint{bad})
	w := workload.NewWriter(current.get, c.Client, workload.WriterOptions{})
	if err := w.Start(context.Background()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	eventually(t, "writes fail against the dead address", func() (bool, string) {
		s := w.Snapshot()
		return s.FailedWrites >= 3, fmt.Sprintf("failed=%d acked=%d", s.FailedWrites, s.AckedWrites)
	})
	current.set([]workload.Endpoint{good})
	eventually(t, "writes succeed at the corrected address", func() (bool, string) {
		s := w.Snapshot()
		return s.AckedWrites >= 5, fmt.Sprintf("failed=%d acked=%d", s.FailedWrites, s.AckedWrites)
	})
	res := w.Stop(context.Background())
	if res.Acked[0].Seq != 1 {
		t.Errorf("first acknowledged seq %d, want 1: a failed write keeps its number", res.Acked[0].Seq)
	}
	for _, s := range res.Latencies {
		if s.Member != good.Name {
			t.Errorf("write acknowledged by %s, only %s was listed", s.Member, good.Name)
		}
	}
	if res.FailuresByClass[workload.ClassUnavailable] == 0 {
		t.Errorf("failures by class %v, want unavailable ones from the dead address", res.FailuresByClass)
	}
}

// atomicEndpoints is an endpoints function a test can change while the writer runs.
type atomicEndpoints struct {
	mu  sync.Mutex
	eps []workload.Endpoint
}

func (a *atomicEndpoints) set(eps []workload.Endpoint) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.eps = eps
}

func (a *atomicEndpoints) get() []workload.Endpoint {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]workload.Endpoint(nil), a.eps...)
}

// TestWriterPauses: Pause returns with no put in flight and none follows until Resume; then the
// writer goes on with the next sequence number.
func TestWriterPauses(t *testing.T) {
	c := startCluster(t)
	w := workload.NewWriter(workload.StaticEndpoints(endpointsOf(c)...), c.Client, workload.WriterOptions{Rate: 50})
	if err := w.Start(context.Background()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	eventually(t, "writes acknowledged", ackedAtLeast(w, 5))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := w.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	paused := w.Snapshot()
	time.Sleep(500 * time.Millisecond) // 25 puts' worth at 50/s
	if still := w.Snapshot(); still.AckedWrites != paused.AckedWrites || still.FailedWrites != paused.FailedWrites {
		t.Fatalf("the writer went on while paused: acked %d → %d, failed %d → %d",
			paused.AckedWrites, still.AckedWrites, paused.FailedWrites, still.FailedWrites)
	}
	w.Resume()
	eventually(t, "writes acknowledged after Resume", ackedAtLeast(w, paused.AckedWrites+5))
	res := w.Stop(context.Background())
	for i := 1; i < len(res.Acked); i++ {
		if res.Acked[i].Seq != res.Acked[i-1].Seq+1 {
			t.Fatalf("sequence %d follows %d: the pause lost or repeated a put", res.Acked[i].Seq, res.Acked[i-1].Seq)
		}
	}
}
