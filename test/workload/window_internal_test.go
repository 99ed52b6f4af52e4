package workload

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	conductortls "github.com/etcd-conductor/etcd-conductor/tls"
)

var t0 = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

func TestReportSince(t *testing.T) {
	rep := Report{
		Stopped:              at(10000),
		QuorumLosses:         []Interval{{Start: at(-1000), End: at(200)}, {Start: at(5000), End: at(5500)}, {Start: at(9800)}},
		QuorumUnconfirmed:    []Interval{{Start: at(-500), End: at(100)}, {Start: at(7000), End: at(7300)}},
		WriteFailures:        []FailedAttempt{{At: at(-900), Class: ClassNoLeader}, {At: at(-100), Class: ClassDeadline}, {At: at(5100), Class: ClassDeadline}, {At: at(5200), Class: ClassLeaderChanged}, {At: at(9999), Class: ClassCanceled}},
		LongestWriteGapMs:    1100,
		LongestWriteGapStart: at(-1000),
		WriteLatencies:       []LatencySample{{At: at(-1000)}, {At: at(100)}, {At: at(5000)}, {At: at(5700)}, {At: at(9900)}},
	}
	got := rep.Since(at(0))
	for _, c := range []struct {
		name      string
		got, want int64
	}{
		{"QuorumLossMs", got.QuorumLossMs, 200 + 500 + 200},
		{"QuorumUnconfirmedMs", got.QuorumUnconfirmedMs, 100 + 300},
		{"FailedWrites", int64(got.FailedWrites), 3},
		{"WriteTimeouts", int64(got.WriteTimeouts), 1},
		{"WriteRefusals", int64(got.WriteRefusals), 1},
		{"LongestWriteGapMs (100 ms → 5000 ms)", got.LongestWriteGapMs, 4900},
	} {
		if c.got != c.want {
			t.Errorf("%s = %d, want %d", c.name, c.got, c.want)
		}
	}
}

func TestLeaderStepGap(t *testing.T) {
	gaps := [][2]int{
		{2300, 2400}, // a slow write while a restarted follower catches up: no leader step
		{4000, 4300}, // the election after the leader stopped
		{6300, 6400}, // another slow write, 600 ms before the handover
		{6960, 7020}, // the handover
		{8000, 8200}, // far from any leader change
	}
	var acks []LatencySample
	for ms := 0; ms <= 10000; ms += 10 {
		inGap := false
		for _, g := range gaps {
			inGap = inGap || (ms > g[0] && ms < g[1])
		}
		if !inGap {
			acks = append(acks, LatencySample{At: at(ms)})
		}
	}
	rep := Report{Stopped: at(10000), WriteLatencies: acks}
	if got := rep.LeaderStepGapMs(); got != 0 {
		t.Errorf("no leader change: gap %d, want 0", got)
	}
	obs := func(ms int, member string, reachable bool, leader string, term uint64) LeaderObservation {
		return LeaderObservation{At: at(ms), Member: member, Reachable: reachable, LeaderID: leader, Term: term}
	}
	rep.LeaderEpochs = []LeaderEpoch{{At: at(0), Term: 2, LeaderID: "a", Leader: "etcd-0"}, {At: at(4400), Term: 3, LeaderID: "b", Leader: "etcd-1"}}
	rep.LeaderTimeline = []LeaderObservation{
		obs(0, "etcd-0", true, "a", 2), obs(0, "etcd-1", true, "a", 2), obs(0, "etcd-2", true, "a", 2),
		obs(2000, "etcd-2", false, "", 0), obs(2200, "etcd-2", true, "", 2), // restarted: no leader yet, no sign
		obs(2400, "etcd-2", true, "a", 2),
		obs(4050, "etcd-0", false, "", 0), // the old leader stops answering: the step starts
		obs(4400, "etcd-1", true, "b", 3), obs(4400, "etcd-2", true, "b", 3),
	}
	if got := rep.LeaderStepGapMs(); got != 300 {
		t.Errorf("election: leader step gap %d, want 300 (not the 100 ms at 2.3 s nor the 200 ms at 8 s)", got)
	}
	if steps := rep.leaderSteps(); len(steps) != 1 || !steps[0].Start.Equal(at(3950)) {
		t.Errorf("election step %v, want one from 3950 ms", steps)
	}

	// A handover: the members switch within one poll, with no sign before the new term.
	rep.LeaderEpochs = append(rep.LeaderEpochs, LeaderEpoch{At: at(7000), Term: 4, LeaderID: "c", Leader: "etcd-2"})
	rep.LeaderTimeline = append(rep.LeaderTimeline, obs(4600, "etcd-0", true, "b", 3),
		obs(7000, "etcd-0", true, "c", 4), obs(7000, "etcd-1", true, "c", 4), obs(7000, "etcd-2", true, "c", 4))
	steps := rep.leaderSteps()
	if len(steps) != 2 || !steps[1].Start.Equal(at(6900)) || !steps[1].End.Equal(at(7000)) {
		t.Fatalf("steps %v, want the handover's from 6900 to 7000 ms", steps)
	}
	if got := rep.gapOverlapping(steps[1]); got != 60 {
		t.Errorf("handover: gap %d, want 60 (the 100 ms slow write 600 ms before is not the step's)", got)
	}
	if got := rep.LeaderStepGapMs(); got != 300 {
		t.Errorf("both steps: gap %d, want 300", got)
	}
	if got := rep.LongestWriteGapWithin(at(0), at(2000)); got != 10 {
		t.Errorf("idle jitter %d, want 10", got)
	}
}

// TestQuorumRefusalsApartFromTimeouts: a round is a quorum loss only when the members' own
// answers prove it; probes that ran into the client's deadline make it unconfirmed instead.
func TestQuorumRefusalsApartFromTimeouts(t *testing.T) {
	m, err := NewQuorumMonitor(StaticEndpoints(), conductortls.ClientMaterial{}, QuorumOptions{Expected: 3})
	if err != nil {
		t.Fatal(err)
	}
	timeout := fmt.Errorf("member etcd-1: %w", context.DeadlineExceeded)
	refused := fmt.Errorf("member etcd-2: %w", rpctypes.ErrGRPCNoLeader)
	round := func(ms int, errs ...error) {
		var rs []probeResult
		for i, e := range errs {
			rs = append(rs, probeResult{member: fmt.Sprintf("etcd-%d", i), err: e})
		}
		m.record(at(ms), rs)
	}
	round(0, nil, nil, nil)
	round(100, nil, timeout, refused)         // 1 ok + 1 timed out: unconfirmed, not lost
	round(200, nil, nil, refused)             // quorum again
	round(300, nil, refused, refused)         // refusals prove the loss
	round(400, errors.New("x"), timeout, nil) // 1 ok, 1 timed out, 1 refused: unconfirmed
	round(500, nil, nil, nil)
	res := m.Snapshot()
	if res.QuorumLossMs != 100 || len(res.Losses) != 1 {
		t.Errorf("quorum loss %d ms %v, want 100 ms in one interval", res.QuorumLossMs, res.Losses)
	}
	if res.UnconfirmedMs != 200 || len(res.Unconfirmed) != 2 {
		t.Errorf("unconfirmed %d ms %v, want 200 ms in two intervals", res.UnconfirmedMs, res.Unconfirmed)
	}
	if res.ProbeTimeouts != 2 || res.ProbeRefusals != 5 {
		t.Errorf("probe timeouts %d refusals %d, want 2 and 5", res.ProbeTimeouts, res.ProbeRefusals)
	}
}

// TestLeaderChangedAnswers: only answers saying leadership moved under the request are retried;
// a retried probe is counted whatever its second answer, and that answer decides the round.
func TestLeaderChangedAnswers(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"grpc leader changed", fmt.Errorf("member etcd-0: %w", rpctypes.ErrGRPCLeaderChanged), true},
		{"readyz linearizable read cut by a leader change", &notReadyError{member: "etcd-0", status: 503, body: "[-]linearizable_read failed: etcdserver: leader changed"}, true},
		{"readyz without a leader", &notReadyError{member: "etcd-0", status: 503, body: "[-]linearizable_read failed: etcdserver: no leader"}, false},
		{"no leader", rpctypes.ErrGRPCNoLeader, false},
		{"timeout", context.DeadlineExceeded, false},
		{"ok", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := isLeaderChanged(tc.err); got != tc.want {
				t.Errorf("isLeaderChanged(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}

	m, err := NewQuorumMonitor(StaticEndpoints(), conductortls.ClientMaterial{}, QuorumOptions{Expected: 3})
	if err != nil {
		t.Fatal(err)
	}
	changed := fmt.Errorf("member etcd-1: %w", rpctypes.ErrGRPCLeaderChanged)
	noLeader := fmt.Errorf("member etcd-2: %w", rpctypes.ErrGRPCNoLeader)
	m.record(at(0), []probeResult{{member: "etcd-0"}, {member: "etcd-1", retriedAfter: changed}, {member: "etcd-2", retriedAfter: changed}})
	m.record(at(100), []probeResult{{member: "etcd-0"}, {member: "etcd-1", retriedAfter: changed, err: noLeader}, {member: "etcd-2", retriedAfter: changed, err: noLeader}})
	m.record(at(200), []probeResult{{member: "etcd-0"}, {member: "etcd-1"}, {member: "etcd-2"}})
	res := m.Snapshot()
	if res.LeaderChangedRetries != 4 {
		t.Errorf("leader-changed retries %d, want 4", res.LeaderChangedRetries)
	}
	if res.QuorumLossMs != 100 {
		t.Errorf("quorum loss %d ms, want 100: a retry answered by a refusal is still a loss", res.QuorumLossMs)
	}
}
