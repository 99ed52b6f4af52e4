package plancmd

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/etcd-conductor/etcd-conductor/internal/decide/roles"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/rollout"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
)

const (
	ns     = "shoot"
	newRev = "etcd-main-b"
	oldRev = "etcd-main-a"
)

var now = time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)

func statefulSet(name string, replicas int32) *appsv1.StatefulSet {
	sts := &appsv1.StatefulSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("uid-" + name)},
		Spec: appsv1.StatefulSetSpec{
			Replicas:       ptr.To(replicas),
			Selector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/instance": name}},
			UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType},
		},
	}
	sts.Status.UpdateRevision = newRev
	return sts
}

type podOpt func(*corev1.Pod)

func owned(sts *appsv1.StatefulSet) podOpt {
	return func(p *corev1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: sts.Name, UID: sts.UID, Controller: ptr.To(true)}}
	}
}

func notReady(p *corev1.Pod) {
	p.Status.ContainerStatuses[0].Ready = false
	p.Status.ContainerStatuses[0].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}
}

func memberPod(name, rev string, opts ...podOpt) *corev1.Pod {
	p := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{
			"app.kubernetes.io/instance": name[:strings.LastIndex(name, "-")], appsv1.StatefulSetRevisionLabel: rev}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{
			Name: resources.EtcdContainerName, Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func memberLease(name, holder string) *coordinationv1.Lease {
	return &coordinationv1.Lease{
		TypeMeta: metav1.TypeMeta{APIVersion: "coordination.k8s.io/v1", Kind: "Lease"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{
			"app.kubernetes.io/name": "etcd", "app.kubernetes.io/instance": "etcd-main", "app.kubernetes.io/managed-by": "etcd-conductor"}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder), LeaseDurationSeconds: ptr.To[int32](15),
			RenewTime: &metav1.MicroTime{Time: now.Add(-time.Second)}},
	}
}

// list renders objects as one kubectl-style List.
func list(t *testing.T, objs ...any) []byte {
	t.Helper()
	data, err := yaml.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "items": objs})
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// stream renders objects as a multi-document YAML stream.
func stream(t *testing.T, objs ...any) []byte {
	t.Helper()
	var docs []string
	for _, o := range objs {
		data, err := yaml.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, string(data))
	}
	return []byte(strings.Join(docs, "---\n") + "---\n")
}

// planOn decodes a state and a member status as the plan command does and plans on them.
func planOn(state, memberStatus []byte, mode roles.SourcePolicy) (Output, error) {
	st, err := DecodeState(state)
	if err != nil {
		return Output{}, err
	}
	members, err := DecodeMemberStatus(memberStatus)
	if err != nil {
		return Output{}, err
	}
	src := Sources{Members: Reports(members.Reports), Answers: SavedAnswers(members.Answers)}
	return Plan(context.Background(), st, src, mode, rollout.DefaultPolicy(), now)
}

func TestPlan(t *testing.T) {
	main := statefulSet("etcd-main", 3)
	events := statefulSet("etcd-events", 3)
	unknownKind := map[string]any{"apiVersion": "druid.gardener.cloud/v1alpha1", "kind": "Etcd", "metadata": map[string]any{"name": "etcd-main"}}
	cases := []struct {
		name         string
		state        func(t *testing.T) []byte
		memberStatus string
		mode         roles.SourcePolicy
		wantAction   rollout.Action
		wantPods     []string
		wantRule     rollout.RuleID
		wantSource   roles.Source
	}{
		{name: "list: follower first by lease",
			state: func(t *testing.T) []byte {
				return list(t, main, memberPod("etcd-main-0", oldRev, owned(main)), memberPod("etcd-main-1", oldRev, owned(main)), memberPod("etcd-main-2", newRev, owned(main)),
					memberLease("etcd-main-0", "a1:Member"), memberLease("etcd-main-1", "b2:Leader"), unknownKind)
			},
			mode: roles.SourcePolicyAuto, wantAction: rollout.ActionDelete, wantPods: []string{"etcd-main-0"}, wantRule: rollout.RuleParticipatingFollower, wantSource: roles.SourceLease},
		{name: "member status overrides the lease",
			state: func(t *testing.T) []byte {
				return list(t, main, memberPod("etcd-main-0", oldRev, owned(main)), memberPod("etcd-main-1", oldRev, owned(main)), memberPod("etcd-main-2", newRev, owned(main)),
					memberLease("etcd-main-0", "a1:Member"), memberLease("etcd-main-1", "b2:Leader"))
			},
			memberStatus: `{"members":[{"name":"etcd-main-0","id":"a1","leaderID":"a1","reachable":true},{"name":"etcd-main-1","id":"b2","leaderID":"a1","reachable":true}]}`,
			mode:         roles.SourcePolicyAuto, wantAction: rollout.ActionDelete, wantPods: []string{"etcd-main-1"}, wantRule: rollout.RuleParticipatingFollower, wantSource: roles.SourceDirect},
		{name: "multi-document stream; other StatefulSet's pods ignored",
			state: func(t *testing.T) []byte {
				return stream(t, main, memberPod("etcd-main-0", oldRev, owned(main)), memberPod("etcd-main-1", newRev, owned(main)), memberPod("etcd-main-2", newRev, owned(main)),
					memberPod("etcd-events-0", oldRev, owned(events), notReady))
			},
			mode: roles.SourcePolicyAuto, wantAction: rollout.ActionDelete, wantPods: []string{"etcd-main-0"}, wantRule: rollout.RuleParticipatingUnknownRole, wantSource: roles.SourceNone},
		{name: "pods without the StatefulSet as controller are not members, as in the controller",
			state: func(t *testing.T) []byte {
				return list(t, main, memberPod("etcd-main-0", newRev, owned(main)), memberPod("etcd-main-1", oldRev, notReady), memberPod("etcd-main-2", newRev, owned(main)),
					memberPod("etcd-events-1", oldRev, notReady))
			},
			mode: roles.SourcePolicyAuto, wantAction: rollout.ActionWait, wantRule: rollout.RulePodMissing, wantSource: roles.SourceNone},
		{name: "non-participating decision resolves no roles",
			state: func(t *testing.T) []byte {
				return list(t, main, memberPod("etcd-main-0", newRev, owned(main)), memberPod("etcd-main-1", oldRev, owned(main), notReady), memberPod("etcd-main-2", newRev, owned(main)),
					memberLease("etcd-main-0", "a1:Member"), memberLease("etcd-main-1", "b2:Leader"))
			},
			mode: roles.SourcePolicyAuto, wantAction: rollout.ActionDelete, wantPods: []string{"etcd-main-1"}, wantRule: rollout.RuleNonParticipatingDead, wantSource: roles.SourceNone},
		{name: "pods of another namespace are ignored",
			state: func(t *testing.T) []byte {
				other := memberPod("etcd-main-1", oldRev, owned(main))
				other.Namespace = "elsewhere"
				return list(t, main, memberPod("etcd-main-0", newRev, owned(main)), other, memberPod("etcd-main-2", newRev, owned(main)))
			},
			mode: roles.SourcePolicyAuto, wantAction: rollout.ActionWait, wantRule: rollout.RulePodMissing, wantSource: roles.SourceNone},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := planOn(tc.state(t), []byte(tc.memberStatus), tc.mode)
			if err != nil {
				t.Fatal(err)
			}
			want := tc.wantPods
			if want == nil {
				want = []string{}
			}
			if got.Action != tc.wantAction || got.Rule != tc.wantRule || strings.Join(got.Pods, ",") != strings.Join(want, ",") || got.RoleSource != tc.wantSource {
				t.Fatalf("Plan() = %+v\nwant %s %v by %s, role source %s", got, tc.wantAction, want, tc.wantRule, tc.wantSource)
			}
			if got.StatefulSet != ns+"/etcd-main" || got.ConditionReason != tc.wantRule.CamelCase() {
				t.Errorf("StatefulSet %q ConditionReason %q", got.StatefulSet, got.ConditionReason)
			}
		})
	}
}

func TestPlanRejectsBadInput(t *testing.T) {
	main := statefulSet("etcd-main", 3)
	cases := []struct {
		name         string
		state        func(t *testing.T) []byte
		memberStatus string
		want         string
	}{
		{"empty", func(*testing.T) []byte { return []byte("\n \n") }, "", "state is empty"},
		{"broken yaml", func(*testing.T) []byte { return []byte("kind: List\nitems:\n - a: b\n  c: d\n") }, "", "decoding state document 1"},
		{"scalar document", func(*testing.T) []byte { return []byte("42\n") }, "", "state document 1 is not a Kubernetes object"},
		{"item without kind", func(t *testing.T) []byte {
			return list(t, main, map[string]any{"metadata": map[string]any{"name": "x"}})
		}, "", "state document 1, item 1"},
		{"no StatefulSet", func(t *testing.T) []byte { return list(t, memberPod("etcd-main-0", oldRev)) }, "", "state holds no StatefulSet"},
		{"two StatefulSets", func(t *testing.T) []byte { return list(t, main, statefulSet("etcd-events", 1)) }, "", "state holds 2 StatefulSets (etcd-events, etcd-main)"},
		{"member status not JSON", func(t *testing.T) []byte { return list(t, main) }, "members: []", "decoding member status"},
		{"member status unknown field", func(t *testing.T) []byte { return list(t, main) }, `{"members":[{"name":"a","leader":"1"}]}`, `unknown field "leader"`},
		{"member without name", func(t *testing.T) []byte { return list(t, main) }, `{"members":[{"id":"1"}]}`, "member status entry 0 has no name"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := planOn(tc.state(t), []byte(tc.memberStatus), roles.SourcePolicyAuto)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Plan() error = %v, want one containing %q", err, tc.want)
			}
		})
	}
}
