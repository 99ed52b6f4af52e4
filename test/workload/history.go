package workload

import (
	"fmt"
	"time"
)

// Outcome is what the client knows about a Put once it stopped waiting for it.
type Outcome string

const (
	// OutcomeOK: a member acknowledged the Put.
	OutcomeOK Outcome = "ok"
	// OutcomeFailed: no attempt reached a member (no connection could be made, no endpoints), so
	// the Put cannot have taken effect. It carries no information and is left out of the check.
	OutcomeFailed Outcome = "failed"
	// OutcomeUnknown: an attempt reached a member and ended without an answer or with an error
	// (deadline, connection broken, no leader, the writer stopped). etcd may have applied it, then
	// or at any later time, so the check treats it as returning at the end of the history.
	OutcomeUnknown Outcome = "unknown"
)

// PutOp is the writer's Put of one key, all its attempts together. The writer retries a key with
// the same value until a member acknowledges it, and for a register written once with one value
// the attempts are equivalent to a single Put from the first attempt that reached a member
// (Call) to the acknowledgement (Return): the value may appear no earlier than the first
// attempt's call and must have appeared by the first acknowledgement. Folding them keeps a long
// outage, with an attempt every round, from turning one key into thousands of operations.
type PutOp struct {
	Key   string `json:"key"`
	Value string `json:"value"`
	// Call is when the first attempt that may have reached a member was sent.
	Call time.Time `json:"call"`
	// Return is when a member acknowledged it; zero unless Outcome is OutcomeOK.
	Return  time.Time `json:"return,omitzero"`
	Outcome Outcome   `json:"outcome"`
	// Member acknowledged the Put (OutcomeOK) or got its last attempt (otherwise).
	Member string `json:"member,omitempty"`
	// Attempts counts the attempts that may have reached a member.
	Attempts int `json:"attempts"`
}

// ReadOp is one linearizable Get of one key through one member. A Get that failed carries no
// information and is not recorded.
type ReadOp struct {
	Key    string    `json:"key"`
	Member string    `json:"member"`
	Call   time.Time `json:"call"`
	Return time.Time `json:"return"`
	// Found is false when the key was absent; Value is what the member returned otherwise.
	Found bool   `json:"found"`
	Value string `json:"value,omitempty"`
}

// History is every operation the instruments made on the run's keys, for the linearizability
// check (CheckHistory).
type History struct {
	Puts  []PutOp  `json:"puts,omitempty"`
	Reads []ReadOp `json:"reads,omitempty"`
}

// String describes the Put for an error message, times as wall-clock.
func (p PutOp) String() string {
	switch p.Outcome {
	case OutcomeOK:
		return fmt.Sprintf("put %q called %s returned %s acknowledged by %s (%d attempts)",
			p.Value, clock(p.Call), clock(p.Return), p.Member, p.Attempts)
	default:
		return fmt.Sprintf("put %q called %s %s (last attempt on %s, %d attempts)",
			p.Value, clock(p.Call), p.Outcome, p.Member, p.Attempts)
	}
}

// String describes the read for an error message, times as wall-clock.
func (r ReadOp) String() string {
	got := "absent"
	if r.Found {
		got = fmt.Sprintf("%q", r.Value)
	}
	return fmt.Sprintf("read on %s called %s returned %s -> %s", r.Member, clock(r.Call), clock(r.Return), got)
}

// clock is a time of day to the microsecond: the histories are seconds to minutes long and the
// operations milliseconds apart.
func clock(t time.Time) string { return t.Format("15:04:05.000000") }
