package scenario

import (
	"errors"
	"fmt"

	"github.com/etcd-conductor/etcd-conductor/test/workload"
)

// AnyLeaderChanges is Promise.LeaderChanges for a scenario whose fault can move leadership by
// other means than the handover (an election, etcd's own transfer at shutdown).
const AnyLeaderChanges = -1

// Promise is what the design promises for a scenario's rollout: asserted, not only printed.
// Every scenario states one; one that does not make a promise says why (Waived), so a new
// scenario cannot leave the choice unmade by accident.
type Promise struct {
	// NoQuorumLoss: 0 ms of quorum loss the members' own refusals prove (client-side probe
	// timeouts are reported apart). Where no injected fault takes a quorum away.
	NoQuorumLoss bool
	// LeaderChanges is the exact number of leader changes: 1 where the leader is among the
	// replaced members and can hand over, 0 where leadership cannot move (one member), or
	// AnyLeaderChanges.
	LeaderChanges int
	// Waived says why the fault breaks what is not promised (a quorum taken away, a handover
	// prevented). Required unless both promises are made.
	Waived string
}

// Handover is the promise of a rollout no fault disturbs beyond what the quorum can carry: no
// quorum loss and exactly one leader change, the handover.
var Handover = Promise{NoQuorumLoss: true, LeaderChanges: 1}

// Validate rejects a promise that leaves something unpromised without saying why, and a leader
// change count that means nothing.
func (p Promise) Validate() error {
	if p.LeaderChanges < AnyLeaderChanges {
		return fmt.Errorf("promise of %d leader changes: want a count or AnyLeaderChanges", p.LeaderChanges)
	}
	full := p.NoQuorumLoss && p.LeaderChanges >= 0
	if !full && p.Waived == "" {
		return errors.New("the promise leaves quorum loss or the leader changes open without saying why (Waived)")
	}
	return nil
}

// Broken lists what the report shows of the promise broken, with the evidence; nil when it held.
func (p Promise) Broken(r workload.Report) []string {
	var broken []string
	if p.NoQuorumLoss {
		for _, q := range r.QuorumLosses {
			broken = append(broken, fmt.Sprintf("quorum lost for %d ms from %s (members' refusals; %d ms in all, %d ms more unconfirmed by probe timeouts)",
				q.Ms, q.Start.Format("15:04:05.000"), r.QuorumLossMs, r.QuorumUnconfirmedMs))
		}
		if len(r.QuorumLosses) == 0 && r.QuorumLossMs > 0 {
			broken = append(broken, fmt.Sprintf("quorum lost for %d ms (members' refusals)", r.QuorumLossMs))
		}
	}
	if p.LeaderChanges >= 0 && r.LeaderChanges != p.LeaderChanges {
		broken = append(broken, fmt.Sprintf("%d leader changes, promised exactly %d", r.LeaderChanges, p.LeaderChanges))
	}
	return broken
}

// String is the promise as a table cell.
func (p Promise) String() string {
	q := "quorum loss not promised"
	if p.NoQuorumLoss {
		q = "0 ms quorum loss"
	}
	l := "leader changes not promised"
	if p.LeaderChanges >= 0 {
		l = fmt.Sprintf("%d leader change(s)", p.LeaderChanges)
	}
	return q + ", " + l
}
