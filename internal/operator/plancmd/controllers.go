package plancmd

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/defrag"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/memberhealth"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/membership"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/recovery"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/render"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/ruleid"
	defragctl "github.com/etcd-conductor/etcd-conductor/internal/operator/controller/defrag"
	etcdctl "github.com/etcd-conductor/etcd-conductor/internal/operator/controller/etcd"
	membershipctl "github.com/etcd-conductor/etcd-conductor/internal/operator/controller/membership"
	recoveryctl "github.com/etcd-conductor/etcd-conductor/internal/operator/controller/recovery"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/decision"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/memberaccess"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
)

// Controllers is the next step of every controller that decides something for the Etcd.
type Controllers struct {
	Rollout         Step `json:"rollout"`
	Membership      Step `json:"membership"`
	Recovery        Step `json:"recovery"`
	Defragmentation Step `json:"defragmentation"`
	// Transport, Version, Volumes and Trust are the Etcd reconciler's decision
	// (internal/decide/render): the TLS stage it renders, the etcd image and the downgrade call
	// (internal/decide/versionchange), the data claims and the volume change's next step, and the
	// members' TLS material (read from Secrets, which plan does not read).
	Transport Step `json:"transport"`
	Version   Step `json:"version"`
	Volumes   Step `json:"volumes"`
	Trust     Step `json:"trust"`
	// MemberRestart is the membership controller's other step once its membership plan is
	// settled: a stuck member's pod deleted so it restarts (internal/decide/memberhealth).
	MemberRestart Step `json:"memberRestart"`
	// MemberQueryError says why asking all members failed (live mode); the controllers then
	// decide as if no member answered, as they do.
	MemberQueryError string `json:"memberQueryError,omitempty"`
}

// Step is one controller's next step: its planner's decision and what it acts on, or why plan
// cannot tell (NotDecided) rather than a guess.
type Step struct {
	Action string    `json:"action,omitempty"`
	Rule   ruleid.ID `json:"rule,omitempty"`
	Reason string    `json:"reason,omitempty"`

	// What the step acts on; only what the action needs is set.
	Pods       []string `json:"pods,omitempty"`
	HandoverTo string   `json:"handoverTo,omitempty"`
	Member     string   `json:"member,omitempty"`
	MemberID   string   `json:"memberID,omitempty"`
	Target     string   `json:"target,omitempty"`
	// Image is the etcd image the Etcd reconciler renders (the version step).
	Image string `json:"image,omitempty"`
	// Ordinal and Replicas are pointers because 0 is a real ordinal and a real replica count.
	Ordinal   *int   `json:"ordinal,omitempty"`
	Replicas  *int   `json:"replicas,omitempty"`
	ClusterID string `json:"clusterID,omitempty"`

	// NotDecided says why the state plan was given cannot tell this controller's step.
	NotDecided string `json:"notDecided,omitempty"`
	// Notes say what the state did not hold and what plan took in its place where the
	// controller knows more (its memory), so the step is read with that in mind.
	Notes []string `json:"notes,omitempty"`

	// Defragmentation runs only on its schedule: Schedule and NextRun say when, and IfDueNow
	// marks the step as what the planner decides for a run starting now.
	Schedule string     `json:"schedule,omitempty"`
	NextRun  *time.Time `json:"nextRun,omitempty"`
	IfDueNow bool       `json:"ifDueNow,omitempty"`
}

// Answers is what the members said, saved or asked live, for the controllers that decide on more
// than roles (membership, recovery, defragmentation): the whole round, member list included.
type Answers struct {
	// Asked: the members were asked, or their answers saved. Without it nothing is known of them.
	Asked bool
	// Status is the round of answers (nil when asked and none came).
	Status *memberaccess.ClusterStatus
	// QueryErr says why asking live members failed; the membership and recovery controllers
	// then take it that no member answered.
	QueryErr error
	// Heard asks which voters the leader hears (membershipctl.Hear), nil when that cannot be
	// known (saved answers without "heard"). Asked lazily, as the controller does, only when
	// the membership plan waits on it.
	Heard func(ctx context.Context) map[uint64]bool
}

// answered is the round as the membership and recovery controllers take it: nil when no member
// answered.
func (a Answers) answered() *memberaccess.ClusterStatus {
	if a.QueryErr != nil {
		return nil
	}
	return a.Status
}

// AnswerSource asks an Etcd's member pods, or returns saved answers.
type AnswerSource func(ctx context.Context, etcd *druidv1alpha1.Etcd, pods []corev1.Pod) (Answers, error)

// SavedAnswers is an AnswerSource for answers at hand, e.g. from --member-status.
func SavedAnswers(a Answers) AnswerSource {
	return func(context.Context, *druidv1alpha1.Etcd, []corev1.Pod) (Answers, error) { return a, nil }
}

// controllerInputs is the state as the membership, recovery and defragmentation controllers read
// it: the StatefulSet's own pods and the Leases carrying the Etcd's member labels.
type controllerInputs struct {
	etcd    *druidv1alpha1.Etcd
	sts     *appsv1.StatefulSet
	pods    []corev1.Pod
	leases  []coordinationv1.Lease
	answers Answers
	now     time.Time
	// waitForBackup is controllers.etcd.waitForBackupReady (rollout.Policy.WaitForBackupReady).
	waitForBackup bool
}

func planControllers(ctx context.Context, st State, answers AnswerSource, rolled Output, now time.Time, waitForBackup bool) (Controllers, error) {
	out := Controllers{Rollout: Step{Action: string(rolled.Action), Rule: rolled.Rule, Reason: rolled.Reason,
		Pods: rolled.Pods, HandoverTo: rolled.HandoverTo}}
	// A state's Etcd is the one owning the StatefulSet (DecodeState, ReadLive), as the
	// controllers require.
	if st.Etcd == nil {
		// These controllers decide on the Etcd's spec and status (replicas, cluster ID, voters,
		// conditions, schedule); defaults standing in for them would be a guess.
		why := "the state holds no Etcd owning the StatefulSet, and this controller decides on its spec and status"
		out.Membership, out.Recovery, out.Defragmentation = Step{NotDecided: why}, Step{NotDecided: why}, Step{NotDecided: why}
		out.MemberRestart = Step{NotDecided: why}
		out.Transport, out.Version, out.Volumes, out.Trust = Step{NotDecided: why}, Step{NotDecided: why}, Step{NotDecided: why}, Step{NotDecided: why}
		return out, nil
	}
	in := controllerInputs{etcd: st.Etcd, sts: st.StatefulSet, pods: memberaccess.MemberPods(st.StatefulSet, st.Pods),
		leases: decision.MemberLeases(st.Etcd, false, st.Leases), now: now, waitForBackup: waitForBackup}
	if answers != nil {
		var err error
		if in.answers, err = answers(ctx, st.Etcd, in.pods); err != nil {
			return Controllers{}, fmt.Errorf("asking the members of Etcd %s/%s: %w", st.Etcd.Namespace, st.Etcd.Name, err)
		}
	}
	if in.answers.QueryErr != nil {
		out.MemberQueryError = in.answers.QueryErr.Error()
	}
	out.Membership = planMembership(ctx, in)
	out.MemberRestart = planMemberRestart(ctx, in, out.Membership)
	out.Recovery = planRecovery(in)
	out.Defragmentation = planDefragmentation(in)
	out.Transport, out.Version, out.Volumes, out.Trust = planRender(in)
	return out, nil
}

// planRender decides as the Etcd reconciler does (internal/decide/render) on what the state holds:
// the TLS stage to render, the etcd image and downgrade call (the members' versions are what the
// answers say; live mode asks them), the data claims. What plan cannot observe is said: the claims
// and StorageClass of a volume change in view, the TLS material in Secrets.
func planRender(in controllerInputs) (transportStep, versionStep, volumeStep, trustStep Step) {
	var o render.Observed
	var transportNotes, versionNotes []string
	var needsPods bool
	o.Transport, needsPods = etcdctl.ObserveTransport(in.etcd, in.sts)
	if needsPods {
		o.Transport.RolledOut = etcdctl.RolledOut(in.sts, in.pods)
	}
	observed, needsMembers := etcdctl.ObserveVersion(in.etcd, in.sts)
	if needsMembers {
		cs := in.answers.answered()
		if cs == nil {
			cs = &memberaccess.ClusterStatus{}
			versionNotes = append(versionNotes, "no member answers (live mode asks them for their versions): a downgrade waits for every member's word")
		}
		observed = etcdctl.ObserveVersionMembers(observed, *cs, in.pods, in.now, memberhealth.DefaultNotReadyGrace)
		versionNotes = append(versionNotes, fmt.Sprintf("a member pod not Ready is taken as failing to start after notReadyThreshold at its default, %s", memberhealth.DefaultNotReadyGrace))
	}
	o.Version = observed
	var volumeInView bool
	o.Volume, volumeInView = etcdctl.ObserveVolumes(in.etcd, in.sts, in.pods)
	if cs := in.answers.answered(); cs != nil {
		if leader, ok := cs.Leader(); ok {
			if ordinal, ok := resources.OrdinalOf(in.etcd, leader.Name); ok {
				o.Volume.LeaderOrdinal = ordinal
			}
		}
	}
	d := render.Plan(o)

	transportStep = Step{Action: "render " + d.Transport.Render.String(), Rule: d.Transport.Rule, Reason: d.Transport.Reason, Notes: transportNotes}
	action := string(d.Version.Action)
	if action == "" {
		action = "render"
	}
	versionStep = Step{Action: action, Rule: d.Version.Rule, Reason: d.Version.Reason, Image: d.Version.Render, Notes: versionNotes}
	if volumeInView {
		volumeStep = Step{NotDecided: "a volume change is in view or recorded in flight, and its claims, the pods' mounts and the StorageClass are not in the state"}
	} else {
		volumeStep = Step{Action: "render claims " + d.Volume.Name, Rule: d.Volume.Rule, Reason: d.Volume.Reason}
	}
	if resources.UsesTLS(in.etcd) {
		trustStep = Step{NotDecided: "the members' TLS material is decided on the Etcd's TLS Secrets and the member TLS Secret, which plan does not read"}
	} else {
		trustStep = Step{Action: "none", Reason: "the Etcd names no TLS Secrets"}
	}
	return transportStep, versionStep, volumeStep, trustStep
}

// planMembership plans as the membership controller does: first without the leader's view, and
// when the step waits on it, once more with it.
func planMembership(ctx context.Context, in controllerInputs) Step {
	observed := membershipctl.Observe(in.etcd, in.sts, in.pods, in.leases, in.answers.answered(), in.waitForBackup)
	observed.SuperfluousGrace = membershipctl.DefaultSuperfluousGrace
	d := membership.Plan(observed)
	var notes []string
	if d.Rule == membership.RuleHeardUnknown && in.answers.Heard != nil {
		d = membership.Plan(membershipctl.WithHeard(observed, in.answers.Heard(ctx)))
	}
	if !in.answers.Asked {
		notes = append(notes, "no member answers (--member-status, or --etcd-ca/--etcd-cert/--etcd-key live): the member list is unknown")
	}
	if d.Rule == membership.RuleHeardUnknown {
		notes = append(notes, `which voters the leader hears is not known: the saved answers have no "heard"`)
	}
	if d.Rule == membership.RuleSeedUnverified {
		notes = append(notes, "a seeded learner's keyspace is compared with the leader's by the operator before it promotes it; the saved answers hold no comparison")
	}
	if slices.ContainsFunc(observed.Members, func(m membership.Member) bool { return m.Ordinal < 0 }) {
		notes = append(notes, fmt.Sprintf("members no pod stands for are taken as first seen now (the operator keeps that in memory), of the %s grace", membershipctl.DefaultSuperfluousGrace))
	}
	step := Step{Action: string(d.Action), Rule: d.Rule, Reason: d.Reason, Notes: notes}
	if d.Member != nil {
		step.Member, step.MemberID = d.Member.Name, strconv.FormatUint(d.Member.ID, 16)
	}
	if d.Target != nil {
		step.Target = d.Target.Name
	}
	switch d.Action {
	case membership.ActionAddLearner:
		step.Ordinal = &d.Ordinal
		step.Member = resources.PodName(in.etcd, d.Ordinal)
	case membership.ActionSetReplicas:
		step.Replicas = &d.Replicas
	}
	return step
}

// planMemberRestart plans as the membership controller does once its membership plan is settled
// (done): DEP-01 scenario 9, first without the leader's view and, when a pod may be deleted, with
// it. notReadyThreshold is the operator's configuration, which plan takes at its default.
func planMemberRestart(ctx context.Context, in controllerInputs, membershipStep Step) Step {
	if membershipStep.Action != string(membership.ActionDone) {
		return Step{Action: string(memberhealth.ActionWait), Reason: "the membership controller restarts no stuck member until its membership plan is done"}
	}
	observed := membershipctl.Observe(in.etcd, in.sts, in.pods, in.leases, in.answers.answered(), in.waitForBackup)
	d := memberhealth.Plan(membershipctl.HealthObserve(in.etcd, in.pods, observed, in.now, memberhealth.DefaultNotReadyGrace))
	if d.Rule == memberhealth.RuleHeardUnknown && in.answers.Heard != nil {
		d = memberhealth.Plan(membershipctl.HealthObserve(in.etcd, in.pods, membershipctl.WithHeard(observed, in.answers.Heard(ctx)), in.now, memberhealth.DefaultNotReadyGrace))
	}
	step := Step{Action: string(d.Action), Rule: d.Rule, Reason: d.Reason,
		Notes: []string{fmt.Sprintf("notReadyThreshold taken at its default, %s", memberhealth.DefaultNotReadyGrace)}}
	if d.Pod != "" {
		step.Pods = []string{d.Pod}
	}
	return step
}

// planRecovery plans as the recovery controller does, including when it does not look at all.
func planRecovery(in controllerInputs) Step {
	if in.sts.Spec.Replicas != nil && *in.sts.Spec.Replicas == 0 {
		return Step{Action: string(recovery.ActionNone), Reason: "the StatefulSet has 0 replicas (hibernated): the recovery controller does not look"}
	}
	if recoveryctl.NothingToRecover(in.etcd, in.leases) {
		why := "Ready does not say quorum is lost and no recovery is recorded"
		if in.etcd.Status.ClusterID == "" {
			why = "no cluster ID is recorded, the cluster has not formed yet"
		}
		return Step{Action: string(recovery.ActionNone), Reason: "nothing to recover: " + why + "; the controller asks no member"}
	}
	if !in.answers.Asked {
		return Step{NotDecided: "recovery decides on whether a member answers as leader and of which cluster: no member answers (--member-status, or --etcd-ca/--etcd-cert/--etcd-key live)"}
	}
	o := recoveryctl.Observe(in.etcd, in.pods, resources.ControlledLeases(in.etcd, in.leases), in.answers.answered(), recoveryctl.DefaultGrace, in.now)
	d := recovery.Plan(o)
	step := Step{Action: string(d.Action), Rule: d.Rule, Reason: d.Reason, ClusterID: d.ClusterID}
	if d.Pod != "" {
		step.Pods = []string{d.Pod}
	}
	if d.State != nil {
		step.Member = d.State.Member
	}
	return step
}

// planDefragmentation says when the next scheduled run is and what the planner decides for a run
// starting now. Whether a run is under way, and which members it handled, lives in the
// operator's memory, so plan takes a run that has just started.
func planDefragmentation(in controllerInputs) Step {
	spec := in.etcd.Spec.Etcd.DefragmentationSchedule
	if spec == nil || *spec == "" {
		return Step{Action: string(defrag.ActionNone), Reason: "spec.etcd.defragmentationSchedule is not set: no run is ever due"}
	}
	schedule, err := resources.DefragmentationSchedule(in.etcd)
	if err != nil {
		return Step{Schedule: *spec, NotDecided: fmt.Sprintf("the schedule does not parse (the controller keeps a previous one, if it had any): %v", err)}
	}
	next := schedule.Next(in.now).UTC()
	step := Step{Schedule: *spec, NextRun: &next, IfDueNow: true}
	if !in.answers.Asked {
		step.NotDecided = "a run decides on each member's health, role and database size: no member answers (--member-status, or --etcd-ca/--etcd-cert/--etcd-key live)"
		return step
	}
	var status map[string]memberaccess.MemberStatus
	if in.answers.Status != nil {
		status = defragctl.StatusByMember(*in.answers.Status)
	}
	d := defrag.Plan(defragctl.Observe(in.etcd, in.sts, in.pods, status, map[string]bool{}, in.waitForBackup))
	step.Action, step.Rule, step.Reason, step.Member = string(d.Action), d.Rule, d.Reason, d.Member
	step.Notes = []string{"a run that starts now, with no member handled yet: a run under way lives in the operator's memory"}
	return step
}
