package plancmd

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/etcd-conductor/etcd-conductor/etcdclient"
	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/defrag"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/memberhealth"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/membership"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/recovery"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/roles"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/rollout"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/memberaccess"
	conductortls "github.com/etcd-conductor/etcd-conductor/tls"
)

const clusterID = "c1"

// ownedEtcd returns an Etcd of replicas members with a recorded cluster ID, made the controller
// of sts.
func ownedEtcd(sts *appsv1.StatefulSet, replicas int32) *druidv1alpha1.Etcd {
	etcd := &druidv1alpha1.Etcd{ObjectMeta: metav1.ObjectMeta{Name: sts.Name, Namespace: ns, UID: types.UID("uid-etcd")}}
	etcd.Spec.Replicas = replicas
	etcd.Status.ClusterID = clusterID
	sts.OwnerReferences = []metav1.OwnerReference{{APIVersion: druidv1alpha1.GroupVersion.String(), Kind: "Etcd", Name: etcd.Name, UID: etcd.UID, Controller: ptr.To(true)}}
	return etcd
}

func quorumLost(etcd *druidv1alpha1.Etcd) {
	etcd.Status.Conditions = []druidv1alpha1.Condition{{Type: druidv1alpha1.ConditionTypeReady, Status: druidv1alpha1.ConditionFalse,
		Reason: "QuorumLost", LastTransitionTime: metav1.NewTime(now.Add(-time.Minute))}}
}

// voters answers as a settled cluster of n voters, etcd-main-0 leading; heardCalls counts how
// often the leader's view is asked.
func voters(n int, heardCalls *int) Answers {
	cs := &etcdclient.ClusterStatus{MemberList: []etcdclient.Member{}}
	for i := range n {
		id := uint64(0xa0 + i)
		name := "etcd-main-" + strconv.Itoa(i)
		cs.Members = append(cs.Members, etcdclient.MemberStatus{Name: name, Reachable: true, ID: id, LeaderID: 0xa0, ClusterID: 0xc1, DBSize: 100, DBSizeInUse: 40})
		cs.MemberList = append(cs.MemberList, etcdclient.Member{ID: id, Name: name, ClientURLs: []string{"https://" + name}})
	}
	return Answers{Asked: true, Status: cs, Heard: func(context.Context) map[uint64]bool {
		*heardCalls++
		heard := map[uint64]bool{}
		for _, m := range cs.MemberList {
			heard[m.ID] = true
		}
		return heard
	}}
}

func TestPlanControllers(t *testing.T) {
	cases := []struct {
		name string
		// replicas is the StatefulSet's; desired the Etcd's (0: no Etcd in the state).
		replicas, desired int32
		adjust            func(etcd *druidv1alpha1.Etcd, sts *appsv1.StatefulSet)
		// answering is how many members answer (-1: no answers at all).
		answering  int
		queryErr   error
		want       func(t *testing.T, c Controllers)
		wantHeards int
	}{
		{name: "no Etcd: only the rollout is decided", replicas: 3, answering: 3,
			want: func(t *testing.T, c Controllers) {
				for name, s := range map[string]Step{"membership": c.Membership, "recovery": c.Recovery, "defragmentation": c.Defragmentation} {
					if !strings.Contains(s.NotDecided, "no Etcd") || s.Action != "" {
						t.Errorf("%s: %+v, want not decided for want of the Etcd", name, s)
					}
				}
			}},
		{name: "no member answers: membership waits on the member list, recovery and defragmentation are not decided",
			replicas: 3, desired: 3, answering: -1,
			adjust: func(etcd *druidv1alpha1.Etcd, _ *appsv1.StatefulSet) {
				quorumLost(etcd)
				etcd.Spec.Etcd.DefragmentationSchedule = ptr.To("0 3 * * *")
			},
			want: func(t *testing.T, c Controllers) {
				if c.Membership.Rule != membership.RuleMembersUnknown || len(c.Membership.Notes) == 0 {
					t.Errorf("membership %+v, want %s with a note", c.Membership, membership.RuleMembersUnknown)
				}
				if c.Recovery.NotDecided == "" || c.Defragmentation.NotDecided == "" {
					t.Errorf("recovery %+v, defragmentation %+v: want both not decided", c.Recovery, c.Defragmentation)
				}
				if c.Defragmentation.NextRun == nil || !c.Defragmentation.NextRun.Equal(time.Date(2026, 11, 23, 3, 0, 0, 0, time.UTC)) {
					t.Errorf("next run %v, want the schedule's next time after now", c.Defragmentation.NextRun)
				}
			}},
		{name: "settled cluster: the leader's view is not asked", replicas: 3, desired: 3, answering: 3,
			want: func(t *testing.T, c Controllers) {
				if c.Membership.Action != string(membership.ActionDone) || c.Recovery.Action != string(recovery.ActionNone) ||
					c.Defragmentation.Action != string(defrag.ActionNone) || c.MemberRestart.Rule != memberhealth.RuleDone {
					t.Errorf("got %+v", c)
				}
			}},
		{name: "scale out: the leader's view is asked once, then a learner is added", replicas: 2, desired: 3, answering: 2, wantHeards: 1,
			want: func(t *testing.T, c Controllers) {
				if c.Membership.Rule != membership.RuleAddLearner || c.Membership.Ordinal == nil || *c.Membership.Ordinal != 2 || c.Membership.Member != "etcd-main-2" {
					t.Errorf("membership %+v, want a learner for ordinal 2", c.Membership)
				}
			}},
		{name: "a failed live question: membership and recovery take it that no member answered", replicas: 3, desired: 3, answering: 3,
			queryErr: errors.New("no member answered"),
			adjust:   func(etcd *druidv1alpha1.Etcd, _ *appsv1.StatefulSet) { quorumLost(etcd) },
			want: func(t *testing.T, c Controllers) {
				if c.Membership.Rule != membership.RuleMembersUnknown || c.MemberQueryError != "no member answered" {
					t.Errorf("membership %+v, query error %q", c.Membership, c.MemberQueryError)
				}
				if c.Recovery.Rule != recovery.RuleNoVoters {
					t.Errorf("recovery %+v, want %s", c.Recovery, recovery.RuleNoVoters)
				}
			}},
		{name: "hibernated: recovery does not look", replicas: 0, desired: 0, answering: 0,
			adjust: func(etcd *druidv1alpha1.Etcd, _ *appsv1.StatefulSet) { quorumLost(etcd) },
			want: func(t *testing.T, c Controllers) {
				if c.Recovery.Action != string(recovery.ActionNone) || !strings.Contains(c.Recovery.Reason, "hibernated") {
					t.Errorf("recovery %+v", c.Recovery)
				}
				if c.Membership.Action != string(membership.ActionDone) {
					t.Errorf("membership %+v, want done (hibernated)", c.Membership)
				}
			}},
		{name: "a due defragmentation run defragments a follower first", replicas: 3, desired: 3, answering: 3,
			adjust: func(etcd *druidv1alpha1.Etcd, _ *appsv1.StatefulSet) {
				etcd.Spec.Etcd.DefragmentationSchedule = ptr.To("0 3 * * *")
			},
			want: func(t *testing.T, c Controllers) {
				d := c.Defragmentation
				if d.Rule != defrag.RuleFollower || d.Member == "etcd-main-0" || !d.IfDueNow || d.Schedule != "0 3 * * *" {
					t.Errorf("defragmentation %+v, want a follower as if due now", d)
				}
			}},
		{name: "a member NotReady past the grace: the leader's view asked once, its pod deleted", replicas: 3, desired: 3, answering: 3, wantHeards: 1,
			adjust: func(etcd *druidv1alpha1.Etcd, _ *appsv1.StatefulSet) {
				for i := range 3 {
					m := druidv1alpha1.EtcdMemberStatus{Name: "etcd-main-" + strconv.Itoa(i), Status: druidv1alpha1.EtcdMemberStatusReady,
						LastTransitionTime: metav1.NewTime(now.Add(-time.Hour))}
					if i == 2 {
						m.Status, m.Reason = druidv1alpha1.EtcdMemberStatusNotReady, "UnknownGracePeriodExceeded"
					}
					etcd.Status.Members = append(etcd.Status.Members, m)
				}
			},
			want: func(t *testing.T, c Controllers) {
				r := c.MemberRestart
				if r.Rule != memberhealth.RuleRestartHeardVoter || len(r.Pods) != 1 || r.Pods[0] != "etcd-main-2" || len(r.Notes) == 0 {
					t.Errorf("memberRestart %+v, want etcd-main-2's pod deleted", r)
				}
			}},
		{name: "a scaling under way: no member restarted", replicas: 2, desired: 3, answering: 2, wantHeards: 1,
			want: func(t *testing.T, c Controllers) {
				if c.MemberRestart.Action != string(memberhealth.ActionWait) || !strings.Contains(c.MemberRestart.Reason, "membership plan is done") {
					t.Errorf("memberRestart %+v", c.MemberRestart)
				}
			}},
		{name: "a schedule that does not parse is not decided", replicas: 3, desired: 3, answering: 3,
			adjust: func(etcd *druidv1alpha1.Etcd, _ *appsv1.StatefulSet) {
				etcd.Spec.Etcd.DefragmentationSchedule = ptr.To("every night")
			},
			want: func(t *testing.T, c Controllers) {
				if !strings.Contains(c.Defragmentation.NotDecided, "does not parse") {
					t.Errorf("defragmentation %+v", c.Defragmentation)
				}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sts := statefulSet("etcd-main", tc.replicas)
			sts.Status.Replicas = tc.replicas
			st := State{StatefulSet: sts}
			if tc.desired > 0 || tc.replicas == 0 {
				st.Etcd = ownedEtcd(sts, tc.desired)
			}
			if tc.adjust != nil && st.Etcd != nil {
				tc.adjust(st.Etcd, sts)
			}
			for i := range tc.replicas {
				st.Pods = append(st.Pods, *memberPod("etcd-main-"+strconv.Itoa(int(i)), newRev, owned(sts)))
			}
			heardCalls := 0
			var answers AnswerSource
			if tc.answering >= 0 {
				a := voters(tc.answering, &heardCalls)
				a.QueryErr = tc.queryErr
				answers = SavedAnswers(a)
			}
			out, err := Plan(context.Background(), st, Sources{Answers: answers}, roles.SourcePolicyAuto, rollout.DefaultPolicy(), now)
			if err != nil {
				t.Fatal(err)
			}
			if out.Controllers.Rollout.Rule != out.Rule || out.Controllers.Rollout.Action != string(out.Action) {
				t.Errorf("controllers.rollout %+v differs from the top-level %s by %s", out.Controllers.Rollout, out.Action, out.Rule)
			}
			tc.want(t, out.Controllers)
			if heardCalls != tc.wantHeards {
				t.Errorf("the leader's view was asked %d times, want %d", heardCalls, tc.wantHeards)
			}
		})
	}
}

func TestDecodeMemberStatusAnswers(t *testing.T) {
	cases := []struct {
		name    string
		doc     string
		wantErr string
		want    func(t *testing.T, ms MemberStatus)
	}{
		{name: "reports only: the member list is unknown", doc: `{"members":[{"name":"etcd-main-0","id":"a","leaderID":"a","reachable":true,"clusterID":"c1","dbSize":9}]}`,
			want: func(t *testing.T, ms MemberStatus) {
				cs := ms.Answers.Status
				if !ms.Answers.Asked || cs == nil || cs.MemberList != nil || ms.Answers.Heard != nil {
					t.Fatalf("answers %+v, want asked with no member list and no heard", ms.Answers)
				}
				if m := cs.Members[0]; !m.IsLeader() || m.ClusterID != 0xc1 || m.DBSize != 9 {
					t.Errorf("member %+v", m)
				}
				if len(ms.Reports) != 1 || ms.Reports[0].ID != "a" {
					t.Errorf("reports %+v", ms.Reports)
				}
			}},
		{name: "member list and heard", doc: `{"members":[],"memberList":[{"id":"a","name":"etcd-main-0"},{"id":"b","isLearner":true,"peerURLs":["https://x"]}],"heard":["etcd-main-0"]}`,
			want: func(t *testing.T, ms MemberStatus) {
				cs := ms.Answers.Status
				if len(cs.MemberList) != 2 || !cs.MemberList[1].IsLearner || ms.Answers.Heard == nil {
					t.Fatalf("answers %+v", ms.Answers)
				}
				if heard := ms.Answers.Heard(context.Background()); !heard[0xa] || len(heard) != 1 {
					t.Errorf("heard %v, want only a", heard)
				}
			}},
		{name: "an empty member list is a member list", doc: `{"members":[],"memberList":[]}`,
			want: func(t *testing.T, ms MemberStatus) {
				if ms.Answers.Status.MemberList == nil {
					t.Error("member list nil, want empty")
				}
			}},
		{name: "no document: nothing asked", doc: "",
			want: func(t *testing.T, ms MemberStatus) {
				if ms.Answers.Asked || ms.Reports != nil {
					t.Errorf("got %+v", ms)
				}
			}},
		{name: "id not hex", doc: `{"members":[{"name":"etcd-main-0","id":"xyz"}]}`, wantErr: `member status entry 0 (etcd-main-0): id: "xyz" is not an ID in hex`},
		{name: "cluster ID not hex", doc: `{"members":[{"name":"etcd-main-0","clusterID":"c-1"}]}`, wantErr: "clusterID"},
		{name: "member list entry without id", doc: `{"members":[],"memberList":[{"name":"etcd-main-0"}]}`, wantErr: "member list entry 0"},
		{name: "heard names a member not listed", doc: `{"members":[],"memberList":[{"id":"a","name":"etcd-main-0"}],"heard":["etcd-main-1"]}`, wantErr: "heard names etcd-main-1"},
		{name: "unknown field in the member list", doc: `{"members":[],"memberList":[{"id":"a","learner":true}]}`, wantErr: `unknown field "learner"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ms, err := DecodeMemberStatus([]byte(tc.doc))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.want(t, ms)
		})
	}
}

// TestAskAllMembers: every member pod is asked under plan's own cluster key, at the overridden
// address, and the leader's view is asked of the same targets.
func TestAskAllMembers(t *testing.T) {
	etcd := &druidv1alpha1.Etcd{ObjectMeta: metav1.ObjectMeta{Name: "etcd-main", Namespace: ns}}
	pods := []corev1.Pod{*memberPod("etcd-main-0", newRev), *memberPod("etcd-main-1", newRev)}
	for i := range pods {
		pods[i].Status.PodIP = "10.1.0." + strconv.Itoa(7+i)
	}
	q := &answeringQuerier{status: etcdclient.ClusterStatus{
		Members:    []etcdclient.MemberStatus{{Name: "etcd-main-0", Reachable: true, ID: 0xa, LeaderID: 0xa}, {Name: "etcd-main-1", Reachable: true, ID: 0xb, LeaderID: 0xa}},
		MemberList: []etcdclient.Member{{ID: 0xa, Name: "etcd-main-0"}, {ID: 0xb, Name: "etcd-main-1"}},
	}}
	answers, err := AskAllMembers(q, conductortls.ClientMaterial{}, map[string]string{"etcd-main-1": "127.0.0.1:23791"})(context.Background(), etcd, pods)
	if err != nil || !answers.Asked || answers.QueryErr != nil || answers.Status == nil {
		t.Fatalf("answers %+v, %v", answers, err)
	}
	if q.cluster != "shoot/etcd-main/plan" || len(q.targets) != 2 || q.targets[1].Address != "127.0.0.1:23791" {
		t.Fatalf("asked %s at %+v", q.cluster, q.targets)
	}
	if heard := answers.Heard(context.Background()); !heard[0xa] || !heard[0xb] {
		t.Errorf("heard %v, want both: the leader, and the voter that served a read", heard)
	}
	if len(q.readsAsked) != 1 || q.readsAsked[0] != "etcd-main-1" {
		t.Errorf("reads asked of %v, want etcd-main-1 only", q.readsAsked)
	}
}

// answeringQuerier answers every question with status; every voter asked serves a read.
type answeringQuerier struct {
	memberaccess.Pool // what plan does not ask: a call panics
	status            etcdclient.ClusterStatus
	cluster           string
	targets           []etcdclient.Target
	readsAsked        []string
}

func (q *answeringQuerier) Query(_ context.Context, cluster string, _ conductortls.ClientMaterial, targets []etcdclient.Target) (etcdclient.ClusterStatus, error) {
	q.cluster, q.targets = cluster, targets
	return q.status, nil
}

func (q *answeringQuerier) LinearizableReads(_ context.Context, _ string, _ conductortls.ClientMaterial, _ []etcdclient.Target, names []string) ([]string, error) {
	q.readsAsked = append(q.readsAsked, names...)
	return names, nil
}

// TestPlanVersion: plan shows the Etcd reconciler's version decision as the reconciler makes it,
// the members' versions from their answers.
func TestPlanVersion(t *testing.T) {
	const running, older = "quay.io/coreos/etcd:v3.7.3", "quay.io/coreos/etcd:v3.6.8"
	answering := func(version, storage string) Answers {
		cs := &etcdclient.ClusterStatus{}
		for i := range 3 {
			cs.Members = append(cs.Members, etcdclient.MemberStatus{Name: "etcd-main-" + strconv.Itoa(i), Reachable: true, ID: uint64(0xa0 + i), LeaderID: 0xa0,
				Version: version, StorageVersion: storage})
		}
		return Answers{Asked: true, Status: cs}
	}
	for _, tc := range []struct {
		name, spec string
		answers    AnswerSource
		rule       string
		action     string
		image      string
		note       string
	}{
		{"steady: the spec's image", running, nil, "version/steady", "render", running, ""},
		{"one minor down, every member at the source: enabled, the running image kept", older,
			SavedAnswers(answering("3.7.3", "3.7.0")), "downgrade/enable", "enable", running, "notReadyThreshold"},
		{"one minor down, no member answers: the downgrade waits", older, nil, "downgrade/wait-members", "render", running, "no member answers"},
		{"one minor down, versions from a saved member-status file: enabled", older, savedVersions(t), "downgrade/enable", "enable", running, ""},
		{"two minors down: refused", "quay.io/coreos/etcd:v3.5.21", SavedAnswers(answering("3.7.3", "3.7.0")),
			"downgrade/refuse-more-than-one-minor", "render", running, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sts := statefulSet("etcd-main", 3)
			sts.Spec.Template.Spec.Containers = []corev1.Container{{Name: "etcd", Image: running}}
			etcd := ownedEtcd(sts, 3)
			etcd.Spec.Etcd.Image = ptr.To(tc.spec)
			st := State{Etcd: etcd, StatefulSet: sts}
			for i := range 3 {
				st.Pods = append(st.Pods, *memberPod("etcd-main-"+strconv.Itoa(i), newRev, owned(sts)))
			}
			out, err := Plan(context.Background(), st, Sources{Answers: tc.answers}, roles.SourcePolicyAuto, rollout.DefaultPolicy(), now)
			if err != nil {
				t.Fatal(err)
			}
			v := out.Controllers.Version
			if string(v.Rule) != tc.rule || v.Action != tc.action || v.Image != tc.image {
				t.Fatalf("version step %s %s image %s (%s); want %s %s image %s", v.Action, v.Rule, v.Image, v.Reason, tc.action, tc.rule, tc.image)
			}
			if tc.note != "" && !strings.Contains(strings.Join(v.Notes, "\n"), tc.note) {
				t.Errorf("notes %q do not say %q", v.Notes, tc.note)
			}
		})
	}
}

// savedVersions is a member-status document of three members at 3.7.3 on storage 3.7.0.
func savedVersions(t *testing.T) AnswerSource {
	t.Helper()
	var members []string
	for i := range 3 {
		members = append(members, fmt.Sprintf(`{"name":"etcd-main-%d","id":"a%d","leaderID":"a0","reachable":true,"version":"3.7.3","storageVersion":"3.7.0"}`, i, i))
	}
	ms, err := DecodeMemberStatus([]byte(`{"members":[` + strings.Join(members, ",") + `]}`))
	if err != nil {
		t.Fatal(err)
	}
	return SavedAnswers(ms.Answers)
}
