package decision

import (
	"context"
	"fmt"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/backupgate"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/operation"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/roles"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/rollout"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/memberaccess"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
)

// State is one look at a cluster: what Decide needs before it knows whether roles matter.
type State struct {
	// Etcd owns the StatefulSet. Nil means none is known (a state file without one): the
	// client port and the member DNS names then follow the defaults (port 2379, the Etcd named
	// like the StatefulSet).
	Etcd        *druidv1alpha1.Etcd
	StatefulSet *appsv1.StatefulSet
	// Pods may hold more than the member pods (a whole namespace, as kubectl lists it);
	// Decide keeps those memberaccess.MemberPods selects.
	Pods []corev1.Pod
}

// RoleInputs supplies what Decide reads beyond the objects: what role resolution needs, and the
// reads that show replaced members back. Decide calls them only when the decision depends on
// them, so a settled cluster costs no Lease read and no member traffic.
type RoleInputs interface {
	// MemberLeases returns the Leases of etcd's members (or more; Decide keeps the members').
	MemberLeases(ctx context.Context, etcd *druidv1alpha1.Etcd) ([]coordinationv1.Lease, error)
	// AskMembers asks the targets (possibly none) for their status. An error means roles come
	// from the Leases; it is reported, not fatal. It is not called in LeaseOnly mode.
	AskMembers(ctx context.Context, etcd *druidv1alpha1.Etcd, targets []memberaccess.Target) ([]roles.MemberReport, error)
	// ServeReads has the members named (each among targets, every member's) serve a
	// linearizable read and returns those that did; an error says why the others did not. It is
	// not called in LeaseOnly mode.
	ServeReads(ctx context.Context, etcd *druidv1alpha1.Etcd, targets []memberaccess.Target, names []string) ([]string, error)
}

// Outcome is the pipeline's result.
type Outcome struct {
	Decision rollout.Decision
	// Observed is the observation without roles, which every decision starts from.
	Observed rollout.Observed
	// Pods are the member pods the decision was made on.
	Pods []corev1.Pod
	// RolesResolved is set when the decision depended on roles and Resolution holds them;
	// otherwise Resolution.Source is none and no member was asked.
	RolesResolved bool
	Resolution    roles.Resolution
	// MemberQueryErr says why the members were not asked or did not answer.
	MemberQueryErr error
	// Reports are the members' answers the decision was made on (none unless RolesResolved):
	// the controller finds the handover's member IDs here.
	Reports []roles.MemberReport
	// AwaitingRejoin are the replaced members whose readiness had not caught up and that were
	// asked for a linearizable read (rollout.AwaitingRejoin); Rejoined those that served it and
	// so counted as participating; RejoinErr why the others did not.
	AwaitingRejoin []string
	Rejoined       []string
	RejoinErr      error
	// Unheard are the members a failed handover went to that look ready but did not serve a
	// linearizable read (rollout.HandoverSuspects, Observed.WithUnheard); RejoinErr says why.
	Unheard []string
}

// RejoinPending tells whether a replaced member was asked for a read and did not serve it yet:
// its next answer, not only its readiness, may let the rollout go on.
func (o Outcome) RejoinPending() bool { return len(o.Rejoined) < len(o.AwaitingRejoin) }

// Decide runs observe → resolve roles → plan on st under policy. now decides which Leases are
// fresh.
func Decide(ctx context.Context, st State, in RoleInputs, mode roles.SourcePolicy, policy rollout.Policy, now time.Time) (Outcome, error) {
	etcd := EtcdOrDefault(st.Etcd, st.StatefulSet)
	pods := memberaccess.MemberPods(st.StatefulSet, st.Pods)
	// A saved state without an Etcd has no conditions: nothing else is in flight.
	ops := operation.Of(st.Etcd)
	// Voluntary disruptions wait for the backup (package backupgate); a saved state without an
	// Etcd has no BackupReady either.
	backup := backupgate.Of(st.Etcd, policy.WaitForBackupReady)
	out := Outcome{Pods: pods, Observed: rollout.Observe(st.StatefulSet, pods, nil).WithPolicy(policy).WithOperations(ops).WithBackup(backup)}
	if mode != roles.SourcePolicyLeaseOnly {
		// One round of reads for both: replaced members that may be back before their readiness
		// says so, and members a failed handover went to that may be cut off before it says so.
		out.AwaitingRejoin = rollout.AwaitingRejoin(out.Observed)
		suspects := rollout.HandoverSuspects(out.Observed)
		if asked := append(slices.Clone(out.AwaitingRejoin), suspects...); len(asked) > 0 {
			served, err := in.ServeReads(ctx, etcd, memberaccess.Targets(etcd, pods), asked)
			out.RejoinErr = err
			for _, name := range served {
				if slices.Contains(out.AwaitingRejoin, name) {
					out.Rejoined = append(out.Rejoined, name)
				}
			}
			for _, name := range suspects {
				if !slices.Contains(served, name) {
					out.Unheard = append(out.Unheard, name)
				}
			}
			out.Observed = out.Observed.WithRejoinProven(out.Rejoined).WithUnheard(out.Unheard)
		}
	}
	out.Decision = rollout.Plan(out.Observed)
	out.Resolution = roles.Resolution{Source: roles.SourceNone,
		Detail: fmt.Sprintf("roles not needed: rule %s does not choose among participating members", out.Decision.Rule)}
	if !NeedsRoles(out.Decision) {
		return out, nil
	}

	// The Leases and the members are asked at once: neither answer depends on the other, and
	// this is on the path of every deletion.
	var leases []coordinationv1.Lease
	var leasesErr error
	leasesRead := make(chan struct{})
	go func() {
		defer close(leasesRead)
		leases, leasesErr = in.MemberLeases(ctx, etcd)
	}()
	var reports []roles.MemberReport
	if mode != roles.SourcePolicyLeaseOnly {
		reports, out.MemberQueryErr = in.AskMembers(ctx, etcd, memberaccess.Targets(etcd, pods))
	}
	<-leasesRead
	if leasesErr != nil {
		return out, fmt.Errorf("reading member leases: %w", leasesErr)
	}
	out.RolesResolved = true
	out.Resolution = roles.Resolve(podNames(pods), reports, leasesByPod(etcd, MemberLeases(etcd, st.Etcd != nil, leases)), mode, now)
	if out.MemberQueryErr != nil {
		// Shown in the AllMembersUpdated message and in plan's output, so a TLS problem is
		// visible where users look.
		out.Resolution.Detail = fmt.Sprintf("members not asked: %v; %s", out.MemberQueryErr, out.Resolution.Detail)
	}
	out.Reports = reports
	out.Decision = rollout.Plan(rollout.Observe(st.StatefulSet, pods, out.Resolution.Roles).WithMembers(MemberStatuses(reports)).
		WithPolicy(policy).WithOperations(ops).WithBackup(backup).WithRejoinProven(out.Rejoined).WithUnheard(out.Unheard))
	return out, nil
}

// MemberStatuses turns the members' reports into the planner's view of them, by pod name.
func MemberStatuses(reports []roles.MemberReport) map[string]rollout.MemberStatus {
	out := make(map[string]rollout.MemberStatus, len(reports))
	for _, r := range reports {
		out[r.Name] = rollout.MemberStatus{Reported: r.Reachable, AppliedIndex: r.AppliedIndex, Learner: r.IsLearner}
	}
	return out
}

// NeedsRoles tells whether a role-less decision would change with roles and member status:
// only the choice among participating members (the batch, the catch-up gate, the handover, and
// whether an unheard member holds a deletion or lets a handover go on) looks at them.
func NeedsRoles(d rollout.Decision) bool {
	switch d.Rule {
	case rollout.RuleParticipatingFollower, rollout.RuleParticipatingUnknownRole, rollout.RuleParticipatingLeader,
		rollout.RuleCatchUp, rollout.RuleHandover, rollout.RuleLeaderNoTransferee, rollout.RuleLeaderHandoverFailed,
		rollout.RuleHandoverTargetUnheard:
		return true
	}
	return false
}

// EtcdOrDefault returns etcd, or when it is nil a stand-in named like the StatefulSet with a
// default spec, so ports and names follow the defaults.
func EtcdOrDefault(etcd *druidv1alpha1.Etcd, sts *appsv1.StatefulSet) *druidv1alpha1.Etcd {
	if etcd != nil {
		return etcd
	}
	return &druidv1alpha1.Etcd{ObjectMeta: metav1.ObjectMeta{Name: sts.Name, Namespace: sts.Namespace}}
}

// MemberLeases keeps the Leases of etcd's members: in its namespace, carrying its member
// selector labels and, unless etcd is the stand-in for an unknown Etcd (known false), controlled
// by it. A Lease under a member's name that something else created says nothing about the member
// (see resources.ControlledLeases); a state file may leave the Etcd's UID out, and then its name
// is compared alone.
func MemberLeases(etcd *druidv1alpha1.Etcd, known bool, leases []coordinationv1.Lease) []coordinationv1.Lease {
	selector := labels.SelectorFromSet(resources.SelectorLabels(etcd))
	var out []coordinationv1.Lease
	for _, l := range leases {
		if l.Namespace != etcd.Namespace || !selector.Matches(labels.Set(l.Labels)) {
			continue
		}
		if known {
			ref := memberaccess.EtcdOwner(&l)
			if ref == nil || ref.Name != etcd.Name || (etcd.UID != "" && ref.UID != etcd.UID) {
				continue
			}
		}
		out = append(out, l)
	}
	return out
}

// leasesByPod hands roles the member Leases under the pods they stand for: roles knows members
// by pod, and a Lease is named as its etcd member (<prefix>-<pod> with spec.memberNamePrefix,
// resources.PodOfMember). A Lease of no pod of etcd is left out, as roles would ignore it.
func leasesByPod(etcd *druidv1alpha1.Etcd, leases []coordinationv1.Lease) []coordinationv1.Lease {
	out := make([]coordinationv1.Lease, 0, len(leases))
	for _, l := range leases {
		if pod, ok := resources.PodOfMember(etcd, l.Name); ok {
			l.Name = pod
			out = append(out, l)
		}
	}
	return out
}

func podNames(pods []corev1.Pod) []string {
	names := make([]string, len(pods))
	for i := range pods {
		names[i] = pods[i].Name
	}
	return names
}
