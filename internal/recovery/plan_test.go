package recovery

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

func pods(n int, noData ...int) []Pod {
	var out []Pod
	for i := range n {
		p := Pod{Name: fmt.Sprintf("etcd-%d", i), Ordinal: i, EtcdRunning: true, ClusterID: "old"}
		for _, j := range noData {
			if i == j {
				p.NoData, p.EtcdRunning, p.ClusterID = true, false, ""
			}
		}
		out = append(out, p)
	}
	return out
}

func TestPlan(t *testing.T) {
	lost := func(o Observed) Observed {
		o.QuorumLost, o.QuorumLostFor, o.Grace, o.BackupConfigured, o.RecordedClusterID, o.NewToken = true, time.Minute, 30*time.Second, true, "old", "tok"
		return o
	}
	inProgress := &State{Member: "etcd-1", Token: "tok", OldClusterID: "old"}
	for _, tc := range []struct {
		name   string
		o      Observed
		action Action
		rule   RuleID
		check  func(t *testing.T, d Decision)
	}{
		{name: "healthy", o: Observed{Replicas: 3, Pods: pods(3)}, action: ActionNone, rule: RuleNotNeeded},
		{name: "quorum lost but a leader answers: never restore while a quorum exists",
			o: func() Observed {
				o := lost(Observed{Replicas: 3, Pods: pods(3, 1, 2)})
				o.LeaderAnswered = true
				return o
			}(),
			action: ActionNone, rule: RuleLeaderAnswers},
		{name: "one of three without data: the others bring quorum back",
			o: lost(Observed{Replicas: 3, Pods: pods(3, 2)}), action: ActionWait, rule: RuleDataRemains},
		{name: "two of three without data, within the grace",
			o: func() Observed {
				o := lost(Observed{Replicas: 3, Pods: pods(3, 1, 2)})
				o.QuorumLostFor = 10 * time.Second
				return o
			}(),
			action: ActionWait, rule: RuleGrace},
		{name: "two of three without data, no backup store",
			o: func() Observed {
				o := lost(Observed{Replicas: 3, Pods: pods(3, 1, 2)})
				o.BackupConfigured = false
				return o
			}(),
			action: ActionWait, rule: RuleNoBackup},
		{name: "two of three without data: restore the lowest of them",
			o: lost(Observed{Replicas: 3, Pods: pods(3, 1, 2)}), action: ActionStart, rule: RuleStart,
			check: func(t *testing.T, d Decision) {
				if d.State == nil || d.State.Member != "etcd-1" || d.State.Token != "tok" || d.State.OldClusterID != "old" {
					t.Errorf("state %+v", d.State)
				}
				for _, want := range []string{"2 of 3 members without data", "quorum needs 2", "quorum is already lost", "grace 30s"} {
					if !strings.Contains(d.Reason, want) {
						t.Errorf("reason %q lacks %q", d.Reason, want)
					}
				}
			}},
		{name: "single node that lost its volume", o: lost(Observed{Replicas: 1, Pods: pods(1, 0)}), action: ActionStart, rule: RuleStart},
		{name: "in progress, nobody leads yet",
			o: func() Observed {
				o := lost(Observed{Replicas: 3, Pods: pods(3, 1, 2)})
				o.InProgress = inProgress
				return o
			}(),
			action: ActionWait, rule: RuleRestoring},
		{name: "in progress, the old cluster answers as leader: still waiting",
			o: func() Observed {
				o := lost(Observed{Replicas: 3, Pods: pods(3, 2)})
				o.InProgress, o.LeaderAnswered, o.LeaderName, o.LeaderClusterID = inProgress, true, "etcd-1", "old"
				return o
			}(),
			action: ActionWait, rule: RuleRestoring},
		{name: "in progress, the new cluster leads: record its ID",
			o: func() Observed {
				o := lost(Observed{Replicas: 3, Pods: pods(3, 2)})
				o.InProgress, o.LeaderAnswered, o.LeaderName, o.LeaderClusterID = inProgress, true, "etcd-1", "new"
				return o
			}(),
			action: ActionRecordClusterID, rule: RuleRecordID},
		{name: "in progress, recorded: replace the pod still running the old cluster",
			o: func() Observed {
				o := lost(Observed{Replicas: 3, Pods: pods(3, 2)})
				o.Pods[1].ClusterID = "new"
				o.InProgress, o.LeaderAnswered, o.LeaderName, o.LeaderClusterID, o.RecordedClusterID = inProgress, true, "etcd-1", "new", "new"
				return o
			}(),
			action: ActionReplacePod, rule: RuleReplaceOldPod, check: func(t *testing.T, d Decision) {
				if d.Pod != "etcd-0" {
					t.Errorf("pod %q, want etcd-0", d.Pod)
				}
			}},
		{name: "in progress, no old member left: finish",
			o: func() Observed {
				o := lost(Observed{Replicas: 3, Pods: pods(3, 0, 2)})
				o.Pods[1].ClusterID = "new"
				o.InProgress, o.LeaderAnswered, o.LeaderName, o.LeaderClusterID, o.RecordedClusterID = inProgress, true, "etcd-1", "new", "new"
				return o
			}(),
			action: ActionFinish, rule: RuleFinish},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Plan(tc.o)
			if d.Action != tc.action || d.Rule != tc.rule {
				t.Fatalf("got %s [%s] %q, want %s [%s]", d.Action, d.Rule, d.Reason, tc.action, tc.rule)
			}
			if tc.check != nil {
				tc.check(t, d)
			}
		})
	}
}

// TestPlanProperties checks, over random observations, the safety rules: a restore starts only
// when quorum is lost beyond the grace, no leader answers, a backup store is configured and the
// members that may hold data are fewer than a quorum; the member asked to restore has no data;
// only a pod answering with another cluster's ID is ever replaced.
func TestPlanProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	ids := []string{"", "old", "new", "other"}
	for range 200000 {
		n := 1 + rng.IntN(7)
		o := Observed{Replicas: n, QuorumLost: rng.IntN(3) > 0, QuorumLostFor: time.Duration(rng.IntN(90)) * time.Second,
			Grace: 30 * time.Second, LeaderAnswered: rng.IntN(2) == 0, BackupConfigured: rng.IntN(4) > 0,
			RecordedClusterID: ids[rng.IntN(len(ids))], LeaderClusterID: ids[rng.IntN(len(ids))], NewToken: "tok"}
		o.LeaderName = fmt.Sprintf("etcd-%d", rng.IntN(n+1))
		for i := range n + rng.IntN(2) {
			if rng.IntN(6) == 0 {
				continue // no pod
			}
			p := Pod{Name: fmt.Sprintf("etcd-%d", i), Ordinal: i, NoData: rng.IntN(2) == 0, EtcdRunning: rng.IntN(2) == 0, ClusterID: ids[rng.IntN(len(ids))]}
			o.Pods = append(o.Pods, p)
		}
		if rng.IntN(3) == 0 {
			o.InProgress = &State{Member: fmt.Sprintf("etcd-%d", rng.IntN(n)), Token: "tok", OldClusterID: ids[rng.IntN(len(ids))]}
		}
		d := Plan(o)
		where := fmt.Sprintf("%+v → %s [%s] %s", o, d.Action, d.Rule, d.Reason)
		switch d.Action {
		case ActionStart:
			noData := 0
			for _, p := range o.Pods {
				if p.NoData && p.Ordinal < n {
					noData++
				}
			}
			if o.InProgress != nil || !o.QuorumLost || o.LeaderAnswered || !o.BackupConfigured || o.QuorumLostFor < o.Grace || n-noData >= Quorum(n) {
				t.Fatalf("restore started unsafely: %s", where)
			}
			var member *Pod
			for i := range o.Pods {
				if o.Pods[i].Name == d.State.Member {
					member = &o.Pods[i]
				}
			}
			if member == nil || !member.NoData || member.Ordinal >= n {
				t.Fatalf("restoring member has data or no pod: %s", where)
			}
		case ActionReplacePod:
			if o.InProgress == nil || !o.LeaderAnswered || o.LeaderName != o.InProgress.Member || o.RecordedClusterID != o.LeaderClusterID {
				t.Fatalf("pod replaced outside a recovery whose new cluster leads and is recorded: %s", where)
			}
			for _, p := range o.Pods {
				if p.Name == d.Pod && (p.ClusterID == "" || p.ClusterID == o.LeaderClusterID || p.Name == o.InProgress.Member) {
					t.Fatalf("replaced a pod that is not known to run another cluster: %s", where)
				}
			}
		case ActionRecordClusterID:
			if o.InProgress == nil || d.ClusterID == "" || d.ClusterID == o.InProgress.OldClusterID {
				t.Fatalf("recorded a cluster ID that is not the new cluster's: %s", where)
			}
		}
		if d.Reason == "" || d.Rule == "" {
			t.Fatalf("decision without reason or rule: %s", where)
		}
	}
}
