package decision

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/etcd-conductor/etcd-conductor/etcdclient"
	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/roles"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/rollout"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/memberaccess"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
)

const (
	ns     = "shoot"
	newRev = "etcd-main-b"
	oldRev = "etcd-main-a"
)

var now = time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)

func testEtcd() *druidv1alpha1.Etcd {
	e := &druidv1alpha1.Etcd{ObjectMeta: metav1.ObjectMeta{Name: "etcd-main", Namespace: ns, UID: "etcd-uid"}}
	e.Spec.Replicas = 3
	e.Spec.Etcd.ClientPort = ptr.To[int32](3379)
	return e
}

func testStatefulSet() *appsv1.StatefulSet {
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "etcd-main", Namespace: ns, UID: "sts-uid"}}
	sts.Spec.Replicas = ptr.To[int32](3)
	sts.Status.UpdateRevision = newRev
	return sts
}

type podOpt func(*corev1.Pod)

func ownedBy(uid types.UID) podOpt {
	return func(p *corev1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{{Kind: "StatefulSet", Name: "etcd-main", UID: uid, Controller: ptr.To(true)}}
	}
}
func withIP(ip string) podOpt       { return func(p *corev1.Pod) { p.Status.PodIP = ip } }
func runningNotReady(p *corev1.Pod) { p.Status.ContainerStatuses[0].Ready = false }
func notReady(p *corev1.Pod) {
	p.Status.ContainerStatuses[0].Ready = false
	p.Status.ContainerStatuses[0].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}
}
func terminating(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{Time: now} }

func pod(name, rev string, opts ...podOpt) corev1.Pod {
	p := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{appsv1.StatefulSetRevisionLabel: rev}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{
			Name: resources.EtcdContainerName, Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}},
	}
	ownedBy("sts-uid")(&p)
	for _, o := range opts {
		o(&p)
	}
	return p
}

func lease(name, holder string) coordinationv1.Lease {
	return coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: resources.SelectorLabels(testEtcd()),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: druidv1alpha1.GroupVersion.String(), Kind: "Etcd", Name: "etcd-main", UID: "etcd-uid", Controller: ptr.To(true)}}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder), LeaseDurationSeconds: ptr.To[int32](15),
			RenewTime: &metav1.MicroTime{Time: now.Add(-time.Second)}},
	}
}

// recordingInputs counts what Decide reads, to prove roles are read only when they decide.
type recordingInputs struct {
	leases      []coordinationv1.Lease
	reports     []roles.MemberReport
	askErr      error
	leaseReads  int
	asked       [][]etcdclient.Target
	askedForKey string
	// served are the members that serve a linearizable read; readsAsked who was asked for one.
	served     []string
	readsAsked [][]string
}

func (r *recordingInputs) ServeReads(_ context.Context, _ *druidv1alpha1.Etcd, targets []etcdclient.Target, names []string) ([]string, error) {
	r.readsAsked = append(r.readsAsked, names)
	var out []string
	for _, n := range names {
		if slices.Contains(r.served, n) && slices.ContainsFunc(targets, func(t etcdclient.Target) bool { return t.Name == n }) {
			out = append(out, n)
		}
	}
	if len(out) < len(names) {
		return out, errors.New("not every member served")
	}
	return out, nil
}

func (r *recordingInputs) MemberLeases(_ context.Context, _ *druidv1alpha1.Etcd) ([]coordinationv1.Lease, error) {
	r.leaseReads++
	return r.leases, nil
}

func (r *recordingInputs) AskMembers(_ context.Context, etcd *druidv1alpha1.Etcd, targets []etcdclient.Target) ([]roles.MemberReport, error) {
	r.asked = append(r.asked, targets)
	r.askedForKey = memberaccess.PoolKey(etcd.Namespace, etcd.Name, memberaccess.ForMembers)
	return r.reports, r.askErr
}

func TestDecide(t *testing.T) {
	rolling := []corev1.Pod{pod("etcd-main-0", oldRev, withIP("10.0.0.1")), pod("etcd-main-1", oldRev, withIP("10.0.0.2")), pod("etcd-main-2", newRev, withIP("10.0.0.3"))}
	leases := []coordinationv1.Lease{lease("etcd-main-0", "a1:Leader"), lease("etcd-main-1", "b2:Member")}
	cases := []struct {
		name         string
		pods         []corev1.Pod
		mode         roles.SourcePolicy
		inputs       *recordingInputs
		wantRule     rollout.RuleID
		wantPod      string
		wantSource   roles.Source
		wantLeases   int
		wantAsked    int
		wantDetail   string
		wantQueryErr bool
	}{
		{name: "non-participating decision reads no roles",
			pods: []corev1.Pod{pod("etcd-main-0", oldRev, notReady), rolling[1], rolling[2]}, mode: roles.SourcePolicyAuto, inputs: &recordingInputs{leases: leases},
			wantRule: rollout.RuleNonParticipatingDead, wantPod: "etcd-main-0", wantSource: roles.SourceNone, wantDetail: "roles not needed"},
		{name: "participating choice asks the members",
			pods: rolling, mode: roles.SourcePolicyAuto,
			inputs: &recordingInputs{leases: leases, reports: []roles.MemberReport{
				{Name: "etcd-main-0", ID: "a1", LeaderID: "b2", Reachable: true}, {Name: "etcd-main-1", ID: "b2", LeaderID: "b2", Reachable: true}}},
			wantRule: rollout.RuleParticipatingFollower, wantPod: "etcd-main-0", wantSource: roles.SourceDirect, wantLeases: 1, wantAsked: 1},
		{name: "LeaseOnly asks nobody",
			pods: rolling, mode: roles.SourcePolicyLeaseOnly, inputs: &recordingInputs{leases: leases},
			wantRule: rollout.RuleParticipatingFollower, wantPod: "etcd-main-1", wantSource: roles.SourceLease, wantLeases: 1},
		{name: "failed question falls back to leases and says why",
			pods: rolling, mode: roles.SourcePolicyAuto, inputs: &recordingInputs{leases: leases, askErr: errors.New("tls: bad certificate")},
			wantRule: rollout.RuleParticipatingFollower, wantPod: "etcd-main-1", wantSource: roles.SourceLease, wantLeases: 1, wantAsked: 1,
			wantDetail: "members not asked: tls: bad certificate", wantQueryErr: true},
		{name: "another StatefulSet's pods are not members",
			pods: []corev1.Pod{rolling[0], rolling[1], pod("etcd-main-2", newRev, ownedBy("old-sts-uid"))}, mode: roles.SourcePolicyAuto, inputs: &recordingInputs{},
			wantRule: rollout.RulePodMissing, wantSource: roles.SourceNone},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := State{Etcd: testEtcd(), StatefulSet: testStatefulSet(), Pods: tc.pods}
			got, err := Decide(context.Background(), st, tc.inputs, tc.mode, rollout.DefaultPolicy(), now)
			if err != nil {
				t.Fatal(err)
			}
			if got.Decision.Rule != tc.wantRule || strings.Join(got.Decision.Pods, ",") != tc.wantPod || got.Resolution.Source != tc.wantSource {
				t.Fatalf("Decide() = %+v, %s; want %s %q, roles from %s", got.Decision, got.Resolution.Source, tc.wantRule, tc.wantPod, tc.wantSource)
			}
			if tc.inputs.leaseReads != tc.wantLeases || len(tc.inputs.asked) != tc.wantAsked {
				t.Errorf("read leases %d times and asked members %d times, want %d and %d", tc.inputs.leaseReads, len(tc.inputs.asked), tc.wantLeases, tc.wantAsked)
			}
			if got.RolesResolved != (tc.wantLeases > 0) || (got.MemberQueryErr != nil) != tc.wantQueryErr {
				t.Errorf("RolesResolved %v, MemberQueryErr %v", got.RolesResolved, got.MemberQueryErr)
			}
			if !strings.Contains(got.Resolution.Detail, tc.wantDetail) {
				t.Errorf("Detail %q, want it to contain %q", got.Resolution.Detail, tc.wantDetail)
			}
			if tc.wantAsked > 0 && tc.inputs.askedForKey != "shoot/etcd-main" {
				t.Errorf("asked for cluster %q", tc.inputs.askedForKey)
			}
		})
	}
}

// TestDecideCarriesMemberStatusIntoThePlan: the applied indexes and learner flags the members
// report reach the planner, so the catch-up gate and the handover see them.
func TestDecideCarriesMemberStatusIntoThePlan(t *testing.T) {
	leaderLast := []corev1.Pod{pod("etcd-main-0", oldRev, withIP("10.0.0.1")), pod("etcd-main-1", newRev, withIP("10.0.0.2")), pod("etcd-main-2", newRev, withIP("10.0.0.3"))}
	report := func(name, id string, applied uint64, learner bool) roles.MemberReport {
		return roles.MemberReport{Name: name, ID: id, LeaderID: "a1", Reachable: true, AppliedIndex: applied, IsLearner: learner}
	}
	cases := []struct {
		name     string
		reports  []roles.MemberReport
		wantRule rollout.RuleID
		wantTo   string
	}{
		{"handover to the most caught-up", []roles.MemberReport{report("etcd-main-0", "a1", 900, false), report("etcd-main-1", "b2", 899, false), report("etcd-main-2", "c3", 900, false)},
			rollout.RuleHandover, "etcd-main-2"},
		{"never to a learner", []roles.MemberReport{report("etcd-main-0", "a1", 900, false), report("etcd-main-1", "b2", 899, false), report("etcd-main-2", "c3", 900, true)},
			rollout.RuleQuorumHeadroom, ""},
		{"a voter lagging holds the handover", []roles.MemberReport{report("etcd-main-0", "a1", 9000, false), report("etcd-main-1", "b2", 1, false), report("etcd-main-2", "c3", 9000, false)},
			rollout.RuleCatchUp, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := State{Etcd: testEtcd(), StatefulSet: testStatefulSet(), Pods: leaderLast}
			got, err := Decide(context.Background(), st, &recordingInputs{reports: tc.reports}, roles.SourcePolicyAuto, rollout.DefaultPolicy(), now)
			if err != nil {
				t.Fatal(err)
			}
			if got.Decision.Rule != tc.wantRule || got.Decision.HandoverTo != tc.wantTo || len(got.Reports) != len(tc.reports) {
				t.Fatalf("Decide() = %+v with %d reports, want %s to %q", got.Decision, len(got.Reports), tc.wantRule, tc.wantTo)
			}
		})
	}
}

// TestDecideAsksReplacedMembersToServeARead: a replaced member whose etcd runs but whose
// readiness probe has not passed yet counts as participating once it serves a linearizable read,
// so the rollout goes on without waiting for the kubelet's next probe; one that does not serve
// holds it (DEP-07 step 3), and only such members are asked.
func TestDecideAsksReplacedMembersToServeARead(t *testing.T) {
	reports := []roles.MemberReport{{Name: "etcd-main-0", ID: "a1", LeaderID: "b2", Reachable: true, AppliedIndex: 10},
		{Name: "etcd-main-1", ID: "b2", LeaderID: "b2", Reachable: true, AppliedIndex: 10}, {Name: "etcd-main-2", ID: "c3", LeaderID: "b2", Reachable: true, AppliedIndex: 10}}
	back := []corev1.Pod{pod("etcd-main-0", oldRev, withIP("10.0.0.1")), pod("etcd-main-1", oldRev, withIP("10.0.0.2")), pod("etcd-main-2", newRev, withIP("10.0.0.3"), runningNotReady)}
	cases := []struct {
		name      string
		pods      []corev1.Pod
		mode      roles.SourcePolicy
		policy    func(*rollout.Policy)
		served    []string
		wantRule  rollout.RuleID
		wantAsked []string
		wantRead  bool
	}{
		{name: "a replaced member that serves counts as back", pods: back, mode: roles.SourcePolicyAuto, served: []string{"etcd-main-2"},
			wantRule: rollout.RuleParticipatingFollower, wantAsked: []string{"etcd-main-2"}, wantRead: true},
		{name: "one that does not serve holds the rollout", pods: back, mode: roles.SourcePolicyAuto,
			wantRule: rollout.RuleUpdatedNotParticipating, wantAsked: []string{"etcd-main-2"}},
		{name: "LeaseOnly asks for no read", pods: back, mode: roles.SourcePolicyLeaseOnly, served: []string{"etcd-main-2"},
			wantRule: rollout.RuleUpdatedNotParticipating},
		{name: "turned off, nobody is asked", pods: back, mode: roles.SourcePolicyAuto, served: []string{"etcd-main-2"},
			policy: func(p *rollout.Policy) { p.RejoinByRead = false }, wantRule: rollout.RuleUpdatedNotParticipating},
		{name: "a crashed replaced member is not asked",
			pods: []corev1.Pod{back[0], back[1], pod("etcd-main-2", newRev, withIP("10.0.0.3"), notReady)}, mode: roles.SourcePolicyAuto,
			served: []string{"etcd-main-2"}, wantRule: rollout.RuleUpdatedNotParticipating},
		{name: "an outdated member not Ready is not asked: it goes first as non-participating",
			pods: []corev1.Pod{pod("etcd-main-0", oldRev, withIP("10.0.0.1"), runningNotReady), back[1], pod("etcd-main-2", newRev, withIP("10.0.0.3"))},
			mode: roles.SourcePolicyAuto, served: []string{"etcd-main-0"}, wantRule: rollout.RuleNonParticipatingAlive},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			policy := rollout.DefaultPolicy()
			if tc.policy != nil {
				tc.policy(&policy)
			}
			in := &recordingInputs{reports: reports, served: tc.served}
			st := State{Etcd: testEtcd(), StatefulSet: testStatefulSet(), Pods: tc.pods}
			got, err := Decide(context.Background(), st, in, tc.mode, policy, now)
			if err != nil {
				t.Fatal(err)
			}
			if got.Decision.Rule != tc.wantRule {
				t.Fatalf("Decide() = %+v, want rule %s", got.Decision, tc.wantRule)
			}
			asked := slices.Concat(in.readsAsked...)
			if !slices.Equal(asked, tc.wantAsked) {
				t.Errorf("asked %v for a read, want %v", asked, tc.wantAsked)
			}
			if read := strings.Contains(got.Decision.Reason, "served a linearizable read before its readiness probe passed"); read != tc.wantRead {
				t.Errorf("reason %q: mentions the read %v, want %v", got.Decision.Reason, read, tc.wantRead)
			}
			if pending := len(tc.wantAsked) > 0 && !tc.wantRead; got.RejoinPending() != pending {
				t.Errorf("RejoinPending() = %v, want %v", got.RejoinPending(), pending)
			}
		})
	}
}

// TestDecideAsksFailedHandoverTargetsToServeARead: after a handover from etcd-main-0 to
// etcd-main-2 failed and another went to etcd-main-1, the old leader (a follower now) is deleted
// only once etcd-main-2, which still looks ready, serves a read through the leader.
func TestDecideAsksFailedHandoverTargetsToServeARead(t *testing.T) {
	reportsLedBy := func(leader string) []roles.MemberReport {
		return []roles.MemberReport{{Name: "etcd-main-0", ID: "a1", LeaderID: leader, Reachable: true, AppliedIndex: 10},
			{Name: "etcd-main-1", ID: "b2", LeaderID: leader, Reachable: true, AppliedIndex: 10}, {Name: "etcd-main-2", ID: "c3", LeaderID: leader, Reachable: true, AppliedIndex: 10}}
	}
	failedTo := func(p *corev1.Pod) {
		p.Annotations = map[string]string{rollout.AnnotationHandoverFailures: "1", rollout.AnnotationHandoverFailedTo: "etcd-main-2"}
	}
	pods := []corev1.Pod{pod("etcd-main-0", oldRev, withIP("10.0.0.1"), failedTo), pod("etcd-main-1", newRev, withIP("10.0.0.2")), pod("etcd-main-2", newRev, withIP("10.0.0.3"))}
	cases := []struct {
		name        string
		mode        roles.SourcePolicy
		leader      string // member ID
		served      []string
		wantRule    rollout.RuleID
		wantAsked   []string
		wantUnheard []string
	}{
		{name: "still the leader: the retry goes on, to the other member", mode: roles.SourcePolicyAuto, leader: "a1",
			wantRule: rollout.RuleHandover, wantAsked: []string{"etcd-main-2"}, wantUnheard: []string{"etcd-main-2"}},
		{name: "it serves: the old leader goes", mode: roles.SourcePolicyAuto, served: []string{"etcd-main-2"},
			wantRule: rollout.RuleParticipatingFollower, wantAsked: []string{"etcd-main-2"}},
		{name: "it does not: the deletion waits", mode: roles.SourcePolicyAuto,
			wantRule: rollout.RuleHandoverTargetUnheard, wantAsked: []string{"etcd-main-2"}, wantUnheard: []string{"etcd-main-2"}},
		{name: "LeaseOnly asks for no read and goes by readiness", mode: roles.SourcePolicyLeaseOnly,
			wantRule: rollout.RuleParticipatingFollower},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.leader == "" {
				tc.leader = "b2"
			}
			in := &recordingInputs{reports: reportsLedBy(tc.leader), served: tc.served,
				leases: []coordinationv1.Lease{lease("etcd-main-0", "a1:Member"), lease("etcd-main-1", "b2:Leader"), lease("etcd-main-2", "c3:Member")}}
			st := State{Etcd: testEtcd(), StatefulSet: testStatefulSet(), Pods: pods}
			got, err := Decide(context.Background(), st, in, tc.mode, rollout.DefaultPolicy(), now)
			if err != nil {
				t.Fatal(err)
			}
			if got.Decision.Rule != tc.wantRule {
				t.Fatalf("Decide() = %+v, want rule %s", got.Decision, tc.wantRule)
			}
			asked := slices.Concat(in.readsAsked...)
			if !slices.Equal(asked, tc.wantAsked) || !slices.Equal(got.Unheard, tc.wantUnheard) {
				t.Errorf("asked %v for a read, unheard %v; want %v, %v", asked, got.Unheard, tc.wantAsked, tc.wantUnheard)
			}
			if tc.wantRule == rollout.RuleHandover && got.Decision.HandoverTo != "etcd-main-1" {
				t.Errorf("handover to %q, want etcd-main-1 (etcd-main-2 is unheard)", got.Decision.HandoverTo)
			}
		})
	}
}

func TestMemberTargetsUseTheEtcdClientPort(t *testing.T) {
	pods := []corev1.Pod{
		pod("etcd-main-0", newRev, withIP("10.1.0.7")),
		pod("etcd-main-1", newRev), // no IP yet
		pod("etcd-main-2", newRev, withIP("10.1.0.9"), terminating),
	}
	want := []etcdclient.Target{{Name: "etcd-main-0", Address: "10.1.0.7:3379", ServerName: "etcd-main-0.etcd-main-peer.shoot.svc"}}
	if got := memberaccess.Targets(testEtcd(), pods); !reflect.DeepEqual(got, want) {
		t.Fatalf("memberaccess.Targets() = %+v, want %+v", got, want)
	}
	defaults := EtcdOrDefault(nil, testStatefulSet())
	if got := memberaccess.Targets(defaults, pods[:1]); got[0].Address != "10.1.0.7:2379" {
		t.Fatalf("without an Etcd the default client port is used, got %s", got[0].Address)
	}
}

func TestMemberLeases(t *testing.T) {
	sts := testStatefulSet()
	unlabelled := lease("etcd-main-1", "b2:Member")
	unlabelled.Labels = nil
	foreign := lease("etcd-main-2", "c3:Member")
	foreign.OwnerReferences = nil
	previous := lease("etcd-main-3", "d4:Member")
	previous.OwnerReferences[0].UID = "previous-etcd-uid"
	leases := []coordinationv1.Lease{lease("etcd-main-0", "a1:Leader"), unlabelled, foreign, previous}
	for _, tc := range []struct {
		name  string
		etcd  *druidv1alpha1.Etcd
		known bool
		want  []string
	}{
		{"the Etcd's own", testEtcd(), true, []string{"etcd-main-0"}},
		{"Etcd recorded without UID", func() *druidv1alpha1.Etcd { e := testEtcd(); e.UID = ""; return e }(), true, []string{"etcd-main-0", "etcd-main-3"}},
		{"stand-in: labels only", EtcdOrDefault(nil, sts), false, []string{"etcd-main-0", "etcd-main-2", "etcd-main-3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, l := range MemberLeases(tc.etcd, tc.known, leases) {
				got = append(got, l.Name)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("MemberLeases() = %v, want %v", got, tc.want)
			}
		})
	}
}
