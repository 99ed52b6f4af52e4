package render

import (
	"time"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/ruleid"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/transport"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/trustchange"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/updatestrategy"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/versionchange"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/volumechange"
)

// How soon a change in flight is looked at again without an event: what it waits on (member
// versions, pods, the kubelet's copy of a Secret) is not watched by the Etcd reconciler. The
// StatefulSet's status changes wake it too; these only bound a missed one.
const (
	// TransportMoveRecheck: while a TLS stage rolls out.
	TransportMoveRecheck = 5 * time.Second
	// VersionChangeRecheck: while a downgrade waits on the members (their storage version, its end).
	VersionChangeRecheck = 3 * time.Second
	// VolumeChangeRecheck: while a volume change waits for every member to be ready.
	VolumeChangeRecheck = 5 * time.Second
	// TrustStepRecheck: while a change of the TLS material waits on a rollout or on the kubelet.
	TrustStepRecheck = 3 * time.Second
	// StrategyHoldRecheck: while the StatefulSet is kept on OnDelete against the gate; the
	// hand-over should follow the step's end closely.
	StrategyHoldRecheck = time.Second
)

// Observed is one look at an Etcd for every part of the decision. Trust is nil when the TLS
// material is not read this pass (no TLS, or not due): the members keep what they mount.
type Observed struct {
	Transport transport.Observed
	Strategy  updatestrategy.Input
	Version   versionchange.Observed
	Volume    volumechange.Observed
	Trust     *trustchange.Observed
	// Conditions are the Etcd's: a change recorded before is recorded again when it ends.
	Conditions []druidv1alpha1.Condition
}

// Part names one part of the decision, in the order Plan decides them.
type Part string

const (
	PartTransport Part = "transport"
	PartVersion   Part = "version"
	PartVolume    Part = "volume"
	PartTrust     Part = "trust"
)

// Refusal is a change a planner refuses: the pass changes nothing and says why.
type Refusal struct {
	Part   Part
	Rule   ruleid.ID
	Reason string
}

// Change is a condition to set for a change in view: True while it is made, waits or is refused,
// False once it is over. Warning marks the Event of a new rule as a Warning.
type Change struct {
	Part      Part
	Condition druidv1alpha1.ConditionType
	Status    druidv1alpha1.ConditionStatus
	Rule      ruleid.ID
	Reason    string
	Warning   bool
}

// Recheck is one reason to look at the Etcd again without an event: how soon, and why (a rule id,
// or what the reconciler waits on).
type Recheck struct {
	After time.Duration
	Why   string
}

// Soonest merges rechecks: the soonest wins, whatever order they were asked in, so a slow recheck
// (a broken backup Secret's 30 s) never delays a step in flight that asked for 3 s (a downgrade, a
// CA rotation). The zero Recheck when none was asked.
func Soonest(rechecks []Recheck) Recheck {
	var first Recheck
	for _, r := range rechecks {
		if r.After > 0 && (first.After == 0 || r.After < first.After) {
			first = r
		}
	}
	return first
}

// Decision is what the reconciler renders and orders this pass, each part its planner's answer.
type Decision struct {
	Transport transport.Decision
	Strategy  updatestrategy.Decision
	Version   versionchange.Decision
	Volume    volumechange.Decision
	// Trust is nil when the TLS material was not read (Observed.Trust nil).
	Trust *trustchange.Decision

	// Refusals, in the order of the parts: with any, nothing is rendered.
	Refusals []Refusal
	// Changes are the conditions to record, version, volume and trust in that order.
	Changes []Change
	// Rechecks are the parts' reasons to look again; Soonest merges them with the reconciler's own.
	Rechecks []Recheck
}

// Change returns the condition to record for part, if any.
func (d Decision) Change(p Part) (Change, bool) {
	for _, c := range d.Changes {
		if c.Part == p {
			return c, true
		}
	}
	return Change{}, false
}

// VolumeNeedsLeader tells whether the volume change can be made once the reconciler knows which
// member leads (it moves leadership to the ordinal replaced last first): the members are asked
// then, and the decision made again with the answer.
func VolumeNeedsLeader(o volumechange.Observed) bool {
	return volumechange.Plan(o).Rule == volumechange.RuleWaitLeader
}

// Plan decides every part on o.
func Plan(o Observed) Decision {
	d := Decision{
		Transport: transport.Plan(o.Transport),
		Strategy:  updatestrategy.Decide(o.Strategy),
		Version:   versionchange.Plan(o.Version),
		Volume:    volumechange.Plan(o.Volume),
	}
	if o.Trust != nil {
		t := trustchange.Plan(*o.Trust)
		d.Trust = &t
	}
	d.Refusals = refusals(d)
	d.Changes = changes(d, o.Conditions)
	d.Rechecks = rechecks(d, o)
	return d
}

func refusals(d Decision) []Refusal {
	var out []Refusal
	if d.Transport.Refused {
		out = append(out, Refusal{PartTransport, d.Transport.Rule, d.Transport.Reason})
	}
	if d.Version.Refused {
		out = append(out, Refusal{PartVersion, d.Version.Rule, d.Version.Reason})
	}
	if d.Volume.Refused {
		out = append(out, Refusal{PartVolume, d.Volume.Rule, d.Volume.Reason})
	}
	return out
}

// changes are the conditions of the changes in view: VersionChange once a version change has been
// in view (True while a downgrade is prepared or under way or a change is refused; False once
// steady, and once a downgrade whose member failed was rolled back), VolumeChange while one is made,
// waits or is refused and once it is done, TrustChange while the TLS material changes, waits or is
// held back and once the members mount what the Secrets hold (a new Etcd's first write is no
// change, unless what it mounts already fails a check).
func changes(d Decision, conds []druidv1alpha1.Condition) []Change {
	var out []Change
	recorded := func(t druidv1alpha1.ConditionType) bool { return druidv1alpha1.FindCondition(conds, t) != nil }
	v := d.Version
	if active := (v.Downgrading || v.Refused || v.Action != versionchange.ActionNone) && !v.RolledBack; active || v.RolledBack || recorded(druidv1alpha1.ConditionTypeVersionChange) {
		out = append(out, change(PartVersion, druidv1alpha1.ConditionTypeVersionChange, active, v.Rule, v.Reason,
			v.Refused || v.Rule == versionchange.RuleRollForwardMemberFailed))
	}
	if vol := d.Volume; vol.InFlight || vol.Done {
		out = append(out, change(PartVolume, druidv1alpha1.ConditionTypeVolumeChange, vol.InFlight, vol.Rule, vol.Reason, vol.Refused))
	}
	if t := d.Trust; t != nil && (t.Rule != trustchange.RuleNew || t.Warning) {
		inFlight := t.Write || t.Waiting || t.Warning
		if inFlight || recorded(druidv1alpha1.ConditionTypeTrustChange) {
			out = append(out, change(PartTrust, druidv1alpha1.ConditionTypeTrustChange, inFlight, t.Rule, t.Reason, t.Warning))
		}
	}
	return out
}

func change(p Part, t druidv1alpha1.ConditionType, inFlight bool, rule ruleid.ID, reason string, warning bool) Change {
	status := druidv1alpha1.ConditionFalse
	if inFlight {
		status = druidv1alpha1.ConditionTrue
	}
	return Change{Part: p, Condition: t, Status: status, Rule: rule, Reason: reason, Warning: warning}
}

func rechecks(d Decision, o Observed) []Recheck {
	var out []Recheck
	if d.Transport.Render != o.Transport.Desired {
		out = append(out, Recheck{TransportMoveRecheck, string(d.Transport.Rule)})
	}
	if d.Strategy.Held() {
		out = append(out, Recheck{StrategyHoldRecheck, string(d.Strategy.Rule)})
	}
	// The downgrade's waits (members, storage version) hold with Downgrading set.
	if d.Version.Downgrading || d.Version.Action != versionchange.ActionNone {
		out = append(out, Recheck{VersionChangeRecheck, string(d.Version.Rule)})
	}
	if d.Volume.Waiting {
		out = append(out, Recheck{VolumeChangeRecheck, string(d.Volume.Rule)})
	}
	if t := d.Trust; t != nil && (t.Write || t.Waiting) {
		out = append(out, Recheck{TrustStepRecheck, string(t.Rule)})
	}
	return out
}
