package transport

import (
	"fmt"
	"strings"

	"github.com/etcd-conductor/etcd-conductor/internal/decide/ruleid"
)

// Stage is where one kind of traffic is.
type Stage string

const (
	// Plain: http only, no TLS material.
	Plain Stage = "plain"
	// Adding: TLS material on every member; clients served on http and https, peers dial https
	// peers but are still dialled at http.
	Adding Stage = "adding"
	// TLS: https only.
	TLS Stage = "tls"
)

// Stages are the stages of client and peer traffic.
type Stages struct {
	Client Stage
	Peer   Stage
}

// Final is where the spec asks the traffic to be: TLS where it names TLS Secrets, else plain.
func Final(clientTLS, peerTLS bool) Stages {
	return Stages{Client: final(clientTLS), Peer: final(peerTLS)}
}

func final(tls bool) Stage {
	if tls {
		return TLS
	}
	return Plain
}

func (s Stages) String() string { return fmt.Sprintf("client %s, peer %s", s.Client, s.Peer) }

// Rule ids.
const (
	RuleNew           ruleid.ID = "transport/new"
	RuleSteady        ruleid.ID = "transport/steady"
	RuleAdd           ruleid.ID = "transport/add-tls-material"
	RuleWaitRollout   ruleid.ID = "transport/wait-rollout"
	RuleSwitch        ruleid.ID = "transport/switch-to-tls"
	RuleCalledOff     ruleid.ID = "transport/adding-called-off"
	RuleRefuseRemoval ruleid.ID = "transport/refuse-tls-removal"
)

// Observed is what the decision needs.
type Observed struct {
	// Desired is Final of the spec.
	Desired Stages
	// Running is what the StatefulSet's template renders; nil before it exists.
	Running *Stages
	// RolledOut: every member pod runs the StatefulSet's template and is ready, so every member
	// holds what Running renders.
	RolledOut bool
}

// Decision is the stages to render.
type Decision struct {
	Render Stages
	Rule   ruleid.ID
	Reason string
	// Refused: the spec asks for what cannot be done; Render keeps what runs.
	Refused bool
}

// Plan picks the stages to render.
func Plan(o Observed) Decision {
	if o.Running == nil {
		return Decision{Render: o.Desired, Rule: RuleNew, Reason: "no member runs yet: " + o.Desired.String()}
	}
	run := *o.Running
	if removed := removals(run, o.Desired); len(removed) > 0 {
		return Decision{Render: run, Rule: RuleRefuseRemoval, Refused: true, Reason: fmt.Sprintf(
			"removing TLS from running members is not supported: %s traffic stays TLS (%s)", strings.Join(removed, " and "), run)}
	}
	if run == o.Desired {
		return Decision{Render: run, Rule: RuleSteady, Reason: run.String()}
	}
	next := Stages{Client: step(run.Client, o.Desired.Client), Peer: step(run.Peer, o.Desired.Peer)}
	switch {
	case next != run:
		// A kind to start adding, or an adding called off: both are safe at once, since every
		// member still serves and dials http.
		rule := RuleAdd
		if calledOff(run, o.Desired) {
			rule = RuleCalledOff
		}
		return Decision{Render: next, Rule: rule, Reason: fmt.Sprintf("%s → %s, rolled out member by member", run, next)}
	case !o.RolledOut:
		return Decision{Render: run, Rule: RuleWaitRollout, Reason: fmt.Sprintf(
			"waiting until every member runs %s before switching to https only", run)}
	}
	return Decision{Render: o.Desired, Rule: RuleSwitch, Reason: fmt.Sprintf(
		"every member holds the TLS material and serves it: %s → %s", run, o.Desired)}
}

// step is the next stage towards want that needs no member to hold anything yet: plain to
// adding, or adding back to plain. adding to TLS needs every member at adding (Plan checks).
func step(run, want Stage) Stage {
	switch {
	case run == Plain && want == TLS:
		return Adding
	case run == Adding && want == Plain:
		return Plain
	}
	return run
}

func removals(run, want Stages) []string {
	var out []string
	if run.Client == TLS && want.Client == Plain {
		out = append(out, "client")
	}
	if run.Peer == TLS && want.Peer == Plain {
		out = append(out, "peer")
	}
	return out
}

func calledOff(run, want Stages) bool {
	return (run.Client == Adding && want.Client == Plain) || (run.Peer == Adding && want.Peer == Plain)
}
