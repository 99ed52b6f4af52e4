package versionchange

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/etcd-conductor/etcd-conductor/internal/decide/ruleid"
)

// Rule ids.
const (
	RuleNew     ruleid.ID = "version/new"
	RuleUnknown ruleid.ID = "version/not-judged"
	RuleSteady  ruleid.ID = "version/steady"
	RuleUpgrade ruleid.ID = "version/upgrade"
	// RuleRefuseUpgradeSkip: etcd upgrades one minor version at a time.
	RuleRefuseUpgradeSkip ruleid.ID = "version/refuse-upgrade-skipping-minor"
	// RuleRefuseDowngradeSkip: etcd downgrades one minor version at a time.
	RuleRefuseDowngradeSkip ruleid.ID = "downgrade/refuse-more-than-one-minor"
	// RuleRefuseMixed: the members do not all run the version the StatefulSet renders.
	RuleRefuseMixed ruleid.ID = "downgrade/refuse-cluster-not-at-source"
	// RuleWaitMembers: not every member answered; a downgrade starts only on all of their word.
	RuleWaitMembers ruleid.ID = "downgrade/wait-members"
	// RuleEnable: the members run the source version and no downgrade is enabled: enable it.
	RuleEnable ruleid.ID = "downgrade/enable"
	// RuleCancelOther: a downgrade to another target is enabled: cancel it first.
	RuleCancelOther ruleid.ID = "downgrade/cancel-other-target"
	// RuleWaitStorage: enabled, but a member's storage is not at the target yet.
	RuleWaitStorage ruleid.ID = "downgrade/wait-storage-version"
	// RuleReplace: every member's storage is at the target: the older image is rendered and the
	// members are replaced the quorum-safe way (the rollout), the leader last.
	RuleReplace ruleid.ID = "downgrade/replace-members"
	// RuleRevertUpgrade: the spec went back down while an upgrade had not raised the cluster
	// version yet: no downgrade is needed.
	RuleRevertUpgrade ruleid.ID = "version/revert-upgrade"
	// RuleInProgress: the older image is rendered and etcd has not ended the downgrade yet.
	RuleInProgress ruleid.ID = "downgrade/in-progress"
	// RuleCancelRollForward: the spec went back up while a downgrade is enabled: cancel it and
	// roll forward.
	RuleCancelRollForward ruleid.ID = "downgrade/cancel-roll-forward"
	// RuleRollForwardMemberFailed: a member replaced onto the downgrade's target image failed to
	// start: cancel the downgrade and render the image that ran before, the target recorded as
	// failed.
	RuleRollForwardMemberFailed ruleid.ID = "downgrade/roll-forward-member-failed"
	// RuleMemberFailedNoSource: a member on the target failed, but the image that ran before is
	// not recorded (the target was rendered by a release before this one): nothing more is
	// replaced, the user names the image to go back to.
	RuleMemberFailedNoSource ruleid.ID = "downgrade/member-failed-source-unknown"
	// RuleRefuseFailedTarget: the spec still asks for a target a downgrade was rolled back from.
	RuleRefuseFailedTarget ruleid.ID = "downgrade/refuse-failed-target"
)

// UnderWay are the rules under which a True VersionChange marks a downgrade in flight, which the
// other controllers wait for (internal/decide/operation): from the call that enables it to its
// end or roll-back. A refusal, and the wait for every member's word before the first call, hold
// nobody: nothing has changed yet, and what the others do (a member restarted) may be what it
// waits on.
var UnderWay = []ruleid.ID{RuleEnable, RuleCancelOther, RuleWaitStorage, RuleReplace, RuleInProgress, RuleCancelRollForward, RuleRollForwardMemberFailed}

// Version is an etcd version; only major and minor matter to etcd's cluster and storage versions.
type Version struct {
	Major, Minor, Patch int
}

func (v Version) String() string { return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch) }

// MinorString is the version as etcd's downgrade API and cluster version spell it ("3.6").
func (v Version) MinorString() string { return fmt.Sprintf("%d.%d", v.Major, v.Minor) }

// minor orders versions by major and minor; patches do not change what a member's data is.
func (v Version) minor() int { return v.Major*1000 + v.Minor }

// versionPattern accepts "v3.6.8", "3.6.8", "3.6", the registry.k8s.io style "3.6.8-0" and a
// pre-release "3.7.0-rc.1".
var versionPattern = regexp.MustCompile(`^v?(\d+)\.(\d+)(?:\.(\d+))?(?:[-+][0-9A-Za-z.-]*)?$`)

// ParseVersion reads a version as etcd reports it ("3.6.8", "3.6.0", "3.6").
func ParseVersion(s string) (Version, bool) {
	m := versionPattern.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return Version{}, false
	}
	var v Version
	v.Major, _ = strconv.Atoi(m[1])
	v.Minor, _ = strconv.Atoi(m[2])
	if m[3] != "" {
		v.Patch, _ = strconv.Atoi(m[3])
	}
	return v, true
}

// ParseImage reads the etcd version from an image reference's tag. An image named by digest
// alone, or whose tag is no etcd 3.x version (a wrapper's own version, "latest"), has none.
func ParseImage(image string) (Version, bool) {
	ref := image
	if i := strings.Index(ref, "@"); i >= 0 {
		ref = ref[:i]
	}
	slash := strings.LastIndex(ref, "/")
	colon := strings.LastIndex(ref, ":")
	if colon <= slash {
		return Version{}, false
	}
	v, ok := ParseVersion(ref[colon+1:])
	if !ok || v.Major != 3 {
		return Version{}, false
	}
	return v, true
}

// Member is what one member said about its versions.
type Member struct {
	Name string
	// Answered: the member answered the status question; the other fields are unset otherwise.
	Answered bool
	// Server is the etcd binary's version.
	Server Version
	// Storage is the storage version (etcd 3.6 and later); StorageKnown is false when the member
	// reported none.
	Storage      Version
	StorageKnown bool
	// DowngradeEnabled and DowngradeTarget are the cluster's downgrade state as this member sees
	// it.
	DowngradeEnabled bool
	DowngradeTarget  Version
}

// Observed is what the decision needs.
type Observed struct {
	// Desired is the spec's image; Running the image the StatefulSet's template renders, empty
	// before the StatefulSet exists.
	Desired, Running string
	// StatefulSetReplicas is the StatefulSet's spec.replicas: the number of members that must answer
	// before a downgrade starts.
	StatefulSetReplicas int
	// Members are the answers of the member pods; asked only when NeedsMembers says so.
	Members []Member
	// Source is the image the members ran before a downgrade's target was rendered, as the
	// StatefulSet records it (Decision.Source of the pass that rendered the target); empty
	// when no downgrade target is rendered.
	Source string
	// FailedTarget is the image a downgrade was rolled back from, as the StatefulSet records it
	// (Decision.FailedTarget); empty when none was.
	FailedTarget string
	// Failed are the member pods that fail to start, with the etcd image each was created with
	// (the controller's observation: a waiting reason from which the container does not come
	// up, or not Ready past a bound). Asked with the members.
	Failed []Failure
}

// Failure is one member pod that fails to start.
type Failure struct {
	Pod string
	// Image is the etcd image of the pod's etcd container.
	Image string
	// Reason is what shows it ("ImagePullBackOff: …", "not Ready for 5m0s").
	Reason string
}

// Action is an etcd downgrade API call the decision asks for.
type Action string

const (
	ActionNone Action = ""
	// ActionEnable validates and then enables a downgrade to Decision.Target.
	ActionEnable Action = "enable"
	// ActionCancel cancels the enabled downgrade.
	ActionCancel Action = "cancel"
)

// Decision is the image to render and the call to make.
type Decision struct {
	// Render is the etcd image the StatefulSet's template gets.
	Render string
	Action Action
	// Target is the downgrade target of ActionEnable.
	Target Version
	Rule   ruleid.ID
	Reason string
	// Refused: the spec asks for what etcd cannot do; Render keeps what runs and the reason is
	// reported as the Etcd's error.
	Refused bool
	// Downgrading: a downgrade is under way (enabled, or about to be), for the Etcd's condition.
	Downgrading bool
	// RolledBack: the spec asks for a target a downgrade was rolled back from; refused, and
	// nothing is under way (the Etcd's condition says so with False, as for a steady cluster).
	RolledBack bool
	// Source and FailedTarget are what the StatefulSet is to record with this decision (see
	// Observed): the source while the target is rendered, the failed target while the spec asks
	// for it.
	Source, FailedTarget string
}

// NeedsMembers tells whether Plan needs the members' answers: when the spec's image is of another
// minor version than the running one, or a downgrade was recorded as under way (it must be seen
// to its end, or cancelled when the spec went back).
func NeedsMembers(desired, running string, downgradeRecorded bool) bool {
	if downgradeRecorded {
		return true
	}
	d, okD := ParseImage(desired)
	r, okR := ParseImage(running)
	return okD && okR && d.minor() != r.minor()
}

// Plan picks the image to render and the downgrade call to make, and what the StatefulSet
// records about the downgrade.
func Plan(o Observed) Decision {
	d := plan(o)
	switch d.Rule {
	case RuleReplace:
		// The pass that renders the target records what it replaces.
		d.Source = o.Running
	case RuleInProgress, RuleMemberFailedNoSource:
		d.Source = o.Source
	}
	switch {
	case d.Rule == RuleRollForwardMemberFailed:
		d.FailedTarget = o.Desired
	case o.FailedTarget == o.Desired:
		// Kept until the spec asks for another image: only then may it be tried again.
		d.FailedTarget = o.FailedTarget
	}
	return d
}

func plan(o Observed) Decision {
	if o.Running == "" {
		return Decision{Render: o.Desired, Rule: RuleNew, Reason: "no member runs yet: " + o.Desired}
	}
	desired, okD := ParseImage(o.Desired)
	running, okR := ParseImage(o.Running)
	if !okD || !okR {
		return Decision{Render: o.Desired, Rule: RuleUnknown, Reason: fmt.Sprintf(
			"the etcd version of %q or %q cannot be read from its tag: the change is rolled out as it is, without version checks", o.Running, o.Desired)}
	}
	enabled, target, anyAnswered := downgradeState(o.Members)
	switch {
	case desired.minor() == running.minor():
		return planSameMinor(o, desired, enabled, target, anyAnswered)
	case desired.minor() > running.minor():
		return planUpgrade(o, desired, running, enabled, target)
	}
	return planDowngrade(o, desired, running, enabled, target)
}

func planSameMinor(o Observed, desired Version, enabled bool, target Version, anyAnswered bool) Decision {
	failed := failedOn(o.Failed, o.Desired)
	// The target rendered (a source recorded, or etcd's downgrade to it enabled) and a member on
	// it does not start: going on would take the next member down with this one still out.
	downgrading := o.Source != "" || (enabled && target.minor() == desired.minor())
	if downgrading && len(failed) > 0 {
		return planMemberFailed(o, enabled, target, failed)
	}
	switch {
	case enabled && target.minor() == desired.minor():
		return Decision{Render: o.Desired, Rule: RuleInProgress, Downgrading: true, Reason: fmt.Sprintf(
			"downgrade to %s enabled; members replaced by %s one at a time, etcd ends the downgrade once every member runs it (%s)",
			target.MinorString(), o.Desired, versionsOf(o.Members))}
	case enabled:
		return Decision{Render: o.Desired, Action: ActionCancel, Rule: RuleCancelRollForward, Reason: fmt.Sprintf(
			"a downgrade to %s is enabled but the spec asks for %s: cancelling it (%s)", target.MinorString(), o.Desired, versionsOf(o.Members))}
	case anyAnswered:
		return Decision{Render: o.Desired, Rule: RuleSteady, Reason: fmt.Sprintf("%s; no downgrade enabled (%s)", o.Desired, versionsOf(o.Members))}
	}
	return Decision{Render: o.Desired, Rule: RuleSteady, Reason: o.Desired}
}

// planMemberFailed rolls a downgrade whose member failed on the target back to the recorded
// source: etcd's downgrade cancelled (while a member says it is enabled; a cluster without quorum
// cannot be asked, and the source image brings the members back first) and the source rendered.
func planMemberFailed(o Observed, enabled bool, target Version, failed []Failure) Decision {
	source, ok := ParseImage(o.Source)
	desired, _ := ParseImage(o.Desired)
	if !ok || source.minor() <= desired.minor() {
		return Decision{Render: o.Running, Refused: true, Rule: RuleMemberFailedNoSource, Reason: fmt.Sprintf(
			"%s failed to start on %s and the image the members ran before is not recorded: no other member is replaced; set spec.etcd.image back to it to cancel the downgrade and roll forward (%s)",
			describeFailures(failed), o.Desired, versionsOf(o.Members))}
	}
	d := Decision{Render: o.Source, Rule: RuleRollForwardMemberFailed, Downgrading: true, Reason: fmt.Sprintf(
		"%s failed to start on %s: downgrade cancelled, %s rendered again and the members replaced back one at a time; %s is not tried again until spec.etcd.image changes (%s)",
		describeFailures(failed), o.Desired, o.Source, o.Desired, versionsOf(o.Members))}
	if enabled {
		d.Action = ActionCancel
		d.Reason = fmt.Sprintf("%s failed to start on %s: cancelling the downgrade to %s, %s rendered again and the members replaced back one at a time; %s is not tried again until spec.etcd.image changes (%s)",
			describeFailures(failed), o.Desired, target.MinorString(), o.Source, o.Desired, versionsOf(o.Members))
	}
	return d
}

// failedOn are the failures of pods on image.
func failedOn(failures []Failure, image string) []Failure {
	var out []Failure
	for _, f := range failures {
		if f.Image == image {
			out = append(out, f)
		}
	}
	return out
}

func describeFailures(failed []Failure) string {
	parts := make([]string, 0, len(failed))
	for _, f := range failed {
		parts = append(parts, fmt.Sprintf("%s (%s)", f.Pod, f.Reason))
	}
	return "member pod " + strings.Join(parts, ", ")
}

func planUpgrade(o Observed, desired, running Version, enabled bool, target Version) Decision {
	if enabled {
		return Decision{Render: o.Desired, Action: ActionCancel, Rule: RuleCancelRollForward, Reason: fmt.Sprintf(
			"the spec went back up to %s while a downgrade to %s is enabled: cancelling it and rolling forward (%s)",
			o.Desired, target.MinorString(), versionsOf(o.Members))}
	}
	if desired.minor() > running.minor()+1 {
		return Decision{Render: o.Running, Refused: true, Rule: RuleRefuseUpgradeSkip, Reason: fmt.Sprintf(
			"etcd upgrades one minor version at a time: from %s upgrade to %d.%d first; the members keep %s",
			running.MinorString(), running.Major, running.Minor+1, o.Running)}
	}
	return Decision{Render: o.Desired, Rule: RuleUpgrade, Reason: fmt.Sprintf("%s → %s, rolled out member by member", o.Running, o.Desired)}
}

func planDowngrade(o Observed, desired, running Version, enabled bool, target Version) Decision {
	hold := func(rule ruleid.ID, refused bool, format string, args ...any) Decision {
		return Decision{Render: o.Running, Rule: rule, Refused: refused, Downgrading: !refused,
			Reason: fmt.Sprintf(format, args...) + fmt.Sprintf("; the members keep %s (%s)", o.Running, versionsOf(o.Members))}
	}
	if o.FailedTarget != "" && o.FailedTarget == o.Desired {
		return planFailedTarget(o, enabled, target)
	}
	if desired.Major != running.Major || desired.minor() < running.minor()-1 {
		d := hold(RuleRefuseDowngradeSkip, true, "etcd downgrades one minor version at a time: %s → %s is refused, downgrade to %d.%d first",
			running.MinorString(), desired.MinorString(), running.Major, running.Minor-1)
		return d
	}
	answered := 0
	var silent []string
	for _, m := range o.Members {
		if m.Answered {
			answered++
		} else {
			silent = append(silent, m.Name)
		}
	}
	if answered < o.StatefulSetReplicas || len(silent) > 0 {
		return hold(RuleWaitMembers, false, "a downgrade to %s starts only when every member answers: %d of %d did%s",
			desired.MinorString(), answered, o.StatefulSetReplicas, namesSuffix(" (silent: ", silent))
	}
	atDesired := true
	for _, m := range o.Members {
		if !m.StorageKnown || m.Storage.minor() != desired.minor() {
			atDesired = false
		}
	}
	switch {
	case enabled && target.minor() != desired.minor():
		d := hold(RuleCancelOther, false, "a downgrade to %s is enabled, the spec asks for %s: cancelling it first", target.MinorString(), desired.MinorString())
		d.Action = ActionCancel
		return d
	case atDesired && enabled:
		return Decision{Render: o.Desired, Rule: RuleReplace, Downgrading: true, Reason: fmt.Sprintf(
			"downgrade to %s enabled and every member's storage at it: members replaced by %s one at a time, the leader last (%s)",
			desired.MinorString(), o.Desired, versionsOf(o.Members))}
	case atDesired:
		// An upgrade called off before the cluster version rose: the data is still the older
		// version's, so the older binary runs on it as it is.
		return Decision{Render: o.Desired, Rule: RuleRevertUpgrade, Reason: fmt.Sprintf(
			"the cluster version is still %s (every member's storage): %s → %s rolled back member by member, no downgrade needed (%s)",
			desired.MinorString(), o.Running, o.Desired, versionsOf(o.Members))}
	}
	var off []string
	for _, m := range o.Members {
		if m.Server.minor() != running.minor() {
			off = append(off, fmt.Sprintf("%s runs %s", m.Name, m.Server))
		}
	}
	if len(off) > 0 {
		return hold(RuleRefuseMixed, true, "a downgrade needs every member at %s, the version the StatefulSet runs: %s; let the change under way finish first",
			running.MinorString(), strings.Join(off, ", "))
	}
	if !enabled {
		d := hold(RuleEnable, false, "enabling etcd's downgrade to %s: the cluster version drops to it and every member rewrites its storage version, before any member is replaced",
			desired.MinorString())
		d.Action, d.Target = ActionEnable, Version{Major: desired.Major, Minor: desired.Minor}
		return d
	}
	var behind []string
	for _, m := range o.Members {
		if !m.StorageKnown || m.Storage.minor() != desired.minor() {
			behind = append(behind, m.Name)
		}
	}
	return hold(RuleWaitStorage, false, "downgrade to %s enabled; waiting for the storage version of %s to reach it",
		desired.MinorString(), strings.Join(behind, ", "))
}

// planFailedTarget answers a spec that still asks for a target a downgrade was rolled back from:
// the cancel made again while a member still reports the downgrade enabled (a call that failed,
// or a member that answers again only now), then refused until the spec changes.
func planFailedTarget(o Observed, enabled bool, target Version) Decision {
	if enabled {
		return Decision{Render: o.Running, Action: ActionCancel, Rule: RuleRollForwardMemberFailed, Downgrading: true, Reason: fmt.Sprintf(
			"a member failed to start on %s: cancelling the downgrade to %s, the members keep %s (%s)",
			o.Desired, target.MinorString(), o.Running, versionsOf(o.Members))}
	}
	return Decision{Render: o.Running, Refused: true, RolledBack: true, Rule: RuleRefuseFailedTarget, Reason: fmt.Sprintf(
		"a member failed to start on %s, so the downgrade to it was cancelled and rolled back: it is not tried again until spec.etcd.image changes; the members keep %s (%s)",
		o.Desired, o.Running, versionsOf(o.Members))}
}

// downgradeState is the downgrade the members report: enabled when any answering member says so
// (the state is the cluster's, replicated by raft; a member that has not applied it yet lags).
func downgradeState(members []Member) (enabled bool, target Version, anyAnswered bool) {
	for _, m := range members {
		if !m.Answered {
			continue
		}
		anyAnswered = true
		if m.DowngradeEnabled && !enabled {
			enabled, target = true, m.DowngradeTarget
		}
	}
	return enabled, target, anyAnswered
}

// versionsOf is the members' versions for a reason: "etcd-0 3.7.3/storage 3.7.0, etcd-1 silent".
func versionsOf(members []Member) string {
	if len(members) == 0 {
		return "members not asked"
	}
	parts := make([]string, 0, len(members))
	for _, m := range members {
		switch {
		case !m.Answered:
			parts = append(parts, m.Name+" silent")
		case m.StorageKnown:
			parts = append(parts, fmt.Sprintf("%s %s/storage %s", m.Name, m.Server, m.Storage.MinorString()))
		default:
			parts = append(parts, fmt.Sprintf("%s %s", m.Name, m.Server))
		}
	}
	return strings.Join(parts, ", ")
}

func namesSuffix(prefix string, names []string) string {
	if len(names) == 0 {
		return ""
	}
	return prefix + strings.Join(names, ", ") + ")"
}
