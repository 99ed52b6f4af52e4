package workload

import (
	"context"
	"fmt"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/etcd-conductor/etcd-conductor/internal/decide/quorum"
	conductortls "github.com/etcd-conductor/etcd-conductor/tls"
)

// SettleOptions tunes WaitSettled.
type SettleOptions struct {
	// Expected is the cluster's member count; at least a quorum of it must answer.
	Expected int
	// Stable is how long the answers must stay the same (default 1 s).
	Stable time.Duration
	// Timeout bounds the wait (default 60 s).
	Timeout time.Duration
}

// Settled is the state WaitSettled found.
type Settled struct {
	Leader    string
	Term      uint64
	Answering int
	Took      time.Duration
}

// WaitSettled waits until a fault has settled: at least a quorum of the expected members answer
// Status, every answering member names the same leader in the same term, the leader is among
// them, and all that stays so for Stable. Instruments started after it measure what comes next
// (a rollout), not the election a killed or partitioned member caused.
func WaitSettled(ctx context.Context, endpoints EndpointsFunc, creds conductortls.ClientMaterial, o SettleOptions) (Settled, error) {
	if o.Stable <= 0 {
		o.Stable = time.Second
	}
	if o.Timeout <= 0 {
		o.Timeout = time.Minute
	}
	conns := newMemberConns(creds)
	defer conns.close()
	start := time.Now()
	deadline := start.Add(o.Timeout)
	var since time.Time
	var last Settled
	var why string
	for {
		cur, ok, reason := settleRound(ctx, conns, endpoints(), o.Expected)
		switch {
		case !ok:
			since, why = time.Time{}, reason
		case since.IsZero() || cur.Leader != last.Leader || cur.Term != last.Term:
			since = time.Now()
		case time.Since(since) >= o.Stable:
			cur.Took = time.Since(start)
			return cur, nil
		}
		last = cur
		if time.Now().After(deadline) || ctx.Err() != nil {
			return last, fmt.Errorf("cluster not settled after %s: %s", o.Timeout, why)
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// settleRound asks every member once; ok when a quorum answers and agrees on a leader that answers.
func settleRound(ctx context.Context, conns *memberConns, eps []Endpoint, expected int) (Settled, bool, string) {
	list, _ := conns.sync(eps)
	answers := make([]*pb.StatusResponse, len(list))
	var wg sync.WaitGroup
	for i, c := range list {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sctx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			answers[i], _ = c.maint.Status(sctx, &pb.StatusRequest{}, failFast)
		}()
	}
	wg.Wait()
	var s Settled
	var leaderID uint64
	names := map[uint64]string{}
	for i, a := range answers {
		if a == nil {
			continue
		}
		s.Answering++
		names[a.GetHeader().GetMemberId()] = list[i].ep.Name
		switch {
		case a.GetLeader() == 0:
			return s, false, fmt.Sprintf("%s has no leader", list[i].ep.Name)
		case leaderID == 0:
			leaderID, s.Term = a.GetLeader(), a.GetRaftTerm()
		case a.GetLeader() != leaderID || a.GetRaftTerm() != s.Term:
			return s, false, fmt.Sprintf("members disagree on the leader (%x term %d, %s says %x term %d)",
				leaderID, s.Term, list[i].ep.Name, a.GetLeader(), a.GetRaftTerm())
		}
	}
	if s.Answering < quorum.Of(expected) {
		return s, false, fmt.Sprintf("%d of %d members answer", s.Answering, expected)
	}
	s.Leader = names[leaderID]
	if s.Leader == "" {
		return s, false, fmt.Sprintf("leader %x does not answer", leaderID)
	}
	return s, true, ""
}
