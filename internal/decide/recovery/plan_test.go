package recovery

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/etcd-conductor/etcd-conductor/internal/decide/quorum"
)

// voters are n recorded voters etcd-0..; those in gone proved in their pod that their data is
// gone, the others run the old cluster.
func voters(n int, gone ...int) []Voter {
	var out []Voter
	for i := range n {
		v := Voter{Name: fmt.Sprintf("etcd-%d", i), ID: fmt.Sprintf("%x", 100+i), PodUID: fmt.Sprintf("uid-%d", i), HasData: true, State: "etcd down"}
		for _, j := range gone {
			if i == j {
				v.DataGone, v.HasData, v.State = true, false, "init: wait/cluster-unreachable"
			}
		}
		out = append(out, v)
	}
	return out
}

func pods(n int, oldCluster ...int) []Pod {
	var out []Pod
	for i := range n {
		p := Pod{Name: fmt.Sprintf("etcd-%d", i)}
		for _, j := range oldCluster {
			if i == j {
				p.EtcdRunning, p.ClusterID = true, "old"
			}
		}
		out = append(out, p)
	}
	return out
}

func TestPlan(t *testing.T) {
	lost := func(o Observed) Observed {
		o.QuorumLost, o.QuorumLostFor, o.Grace, o.BackupConfigured, o.RecordedClusterID, o.NewToken = true, time.Minute, 30*time.Second, true, "old", "tok"
		if o.Desired == 0 {
			o.Desired = len(o.Voters)
		}
		return o
	}
	with := func(o Observed, f func(*Observed)) Observed {
		f(&o)
		return o
	}
	inProgress := &State{Member: "etcd-1", PodUID: "uid-1", Token: "tok", OldClusterID: "old"}
	for _, tc := range []struct {
		name   string
		o      Observed
		action Action
		rule   RuleID
		// reason holds what the reason must say.
		reason []string
		check  func(t *testing.T, d Decision)
	}{
		{name: "healthy", o: Observed{Voters: voters(3)}, action: ActionNone, rule: RuleNotNeeded},
		{name: "quorum lost but a leader answers: never restore while a quorum exists",
			o:      with(lost(Observed{Voters: voters(3, 1, 2)}), func(o *Observed) { o.LeaderAnswered = true }),
			action: ActionNone, rule: RuleLeaderAnswers},
		{name: "voters never recorded: nothing is restored, whatever the pods say",
			o:      lost(Observed{Pods: pods(3), Desired: 3}),
			action: ActionWait, rule: RuleNoVoters, reason: []string{"never saw the voting membership"}},
		{name: "one of three voters without data: the others bring quorum back",
			o:      lost(Observed{Voters: voters(3, 2)}),
			action: ActionWait, rule: RuleDataRemains,
			reason: []string{"1 of 3 recorded voters proved", "2 may hold it", "a restore needs 2 proven", "awaiting etcd-0 (64): etcd down; etcd-1 (65): etcd down"}},
		{name: "a scale-out in flight: a pod that never joined is no voter and proves nothing",
			// 3 voters, the StatefulSet at 4: etcd-3 has no data and waits; etcd-2 lost its
			// volume; etcd-1 is down with its volume intact. 2 of 4 pods are without data, but
			// only 1 of the 3 voters is.
			o:      lost(Observed{Voters: voters(3, 2), Pods: pods(4), Desired: 5}),
			action: ActionWait, rule: RuleDataRemains},
		{name: "a voter whose pod reported no data but has no pod now proves nothing",
			o: with(lost(Observed{Voters: voters(3, 1, 2)}), func(o *Observed) {
				o.Voters[2].PodUID = ""
			}),
			action: ActionWait, rule: RuleDataRemains},
		{name: "a voter proven empty that also shows data counts as holding data",
			o: with(lost(Observed{Voters: voters(3, 1, 2)}), func(o *Observed) {
				o.Voters[2].HasData = true
			}),
			action: ActionWait, rule: RuleDataRemains},
		{name: "two of three voters without data, but the reports are not authenticated: nothing is restored",
			o: with(lost(Observed{Voters: voters(3, 1, 2)}), func(o *Observed) {
				o.ProofUnauthenticated = "ValidatingAdmissionPolicy x not found"
			}),
			action: ActionWait, rule: RuleProofUnauthenticated,
			reason: []string{"2 of 3 recorded voters proved", "not authenticated: ValidatingAdmissionPolicy x not found"}},
		{name: "in progress, the reports are not authenticated any more: called off",
			o: with(lost(Observed{Voters: voters(3, 1, 2), Pods: pods(3, 0)}), func(o *Observed) {
				o.InProgress = &State{Member: "etcd-1", PodUID: "uid-1", Token: "tok", OldClusterID: "old"}
				o.ProofUnauthenticated = "binding x not found"
			}),
			action: ActionCallOff, rule: RuleCallOff, reason: []string{"not authenticated any more (binding x not found)"}},
		{name: "two of three voters without data, within the grace",
			o:      with(lost(Observed{Voters: voters(3, 1, 2)}), func(o *Observed) { o.QuorumLostFor = 10 * time.Second }),
			action: ActionWait, rule: RuleGrace},
		{name: "two of three voters without data, no backup store",
			o:      with(lost(Observed{Voters: voters(3, 1, 2)}), func(o *Observed) { o.BackupConfigured = false }),
			action: ActionWait, rule: RuleNoBackup},
		{name: "two of three voters without data: restore the first of them",
			o: lost(Observed{Voters: voters(3, 1, 2)}), action: ActionStart, rule: RuleStart,
			reason: []string{"2 of 3 recorded voters proved they lost their data (etcd-1, etcd-2)", "a restore needs 2 proven", "quorum is already lost", "grace 30s"},
			check: func(t *testing.T, d Decision) {
				want := State{Member: "etcd-1", PodUID: "uid-1", Token: "tok", OldClusterID: "old", QuorumLostFor: time.Minute}
				if d.State == nil || *d.State != want {
					t.Errorf("state %+v, want %+v", d.State, want)
				}
			}},
		{name: "three of five voters without data", o: lost(Observed{Voters: voters(5, 0, 3, 4)}), action: ActionStart, rule: RuleStart},
		{name: "two of five voters without data", o: lost(Observed{Voters: voters(5, 3, 4)}), action: ActionWait, rule: RuleDataRemains},
		{name: "single member that lost its volume", o: lost(Observed{Voters: voters(1, 0)}), action: ActionStart, rule: RuleStart},
		{name: "in progress, nobody leads yet",
			o:      with(lost(Observed{Voters: voters(3, 1, 2), Pods: pods(3, 0)}), func(o *Observed) { o.InProgress = inProgress }),
			action: ActionWait, rule: RuleRestoring},
		{name: "in progress, the restoring member's proof is spent: it still counts as without data",
			o: with(lost(Observed{Voters: voters(3, 2), Pods: pods(3, 0)}), func(o *Observed) {
				o.InProgress = inProgress
				o.Voters[1].State = "restoring"
			}),
			action: ActionWait, rule: RuleRestoring},
		{name: "in progress, the restoring member's volume is too small: a wait of its own, with the numbers",
			o: with(lost(Observed{Voters: voters(3, 1, 2), Pods: pods(3, 0)}), func(o *Observed) {
				o.InProgress = inProgress
				o.Pods[1].NoSpace = &SpaceShortage{Dir: "/var/etcd/data", Need: 2 << 30, Free: 1 << 30}
			}),
			action: ActionWait, rule: RuleRestoreNoSpace,
			reason: []string{"etcd-1 cannot restore", "restore needs 2147483648 bytes, volume has 1073741824 free", "1024 MiB short", "/var/etcd/data", "grow the member's volume"},
			check: func(t *testing.T, d Decision) {
				if !d.InProgress() {
					t.Error("a restore short of space is still a recovery in progress")
				}
			}},
		{name: "in progress, another pod short of space is not the restore's",
			o: with(lost(Observed{Voters: voters(3, 1, 2), Pods: pods(3, 0)}), func(o *Observed) {
				o.InProgress = inProgress
				o.Pods[2].NoSpace = &SpaceShortage{Need: 2, Free: 1}
			}),
			action: ActionWait, rule: RuleRestoring},
		{name: "in progress, short of space while the old cluster answers: called off all the same",
			o: with(lost(Observed{Voters: voters(3, 1, 2), Pods: pods(3, 0)}), func(o *Observed) {
				o.InProgress, o.LeaderAnswered, o.LeaderName, o.LeaderClusterID = inProgress, true, "etcd-0", "old"
				o.Pods[1].NoSpace = &SpaceShortage{Need: 2, Free: 1}
			}),
			action: ActionCallOff, rule: RuleCallOff},
		{name: "in progress, the old cluster answers as leader: called off",
			o: with(lost(Observed{Voters: voters(3, 1, 2), Pods: pods(3, 0)}), func(o *Observed) {
				o.InProgress, o.LeaderAnswered, o.LeaderName, o.LeaderClusterID = inProgress, true, "etcd-0", "old"
			}),
			action: ActionCallOff, rule: RuleCallOff, reason: []string{"etcd-0 answers as leader of cluster old", "calling the restore off"}},
		{name: "in progress, the restoring member answers as leader of the old cluster: called off",
			o: with(lost(Observed{Voters: voters(3, 1, 2), Pods: pods(3, 0)}), func(o *Observed) {
				o.InProgress, o.LeaderAnswered, o.LeaderName, o.LeaderClusterID = inProgress, true, "etcd-1", "old"
			}),
			action: ActionCallOff, rule: RuleCallOff},
		{name: "in progress, a voter came back with its data: called off",
			o: with(lost(Observed{Voters: voters(3, 1), Pods: pods(3, 0, 2)}), func(o *Observed) {
				o.InProgress = inProgress
				o.Voters[2].State = "etcd runs cluster old"
			}),
			action: ActionCallOff, rule: RuleCallOff, reason: []string{"1 of 3 recorded voters proved", "awaiting etcd-0 (64): etcd down; etcd-2 (66): etcd runs cluster old"}},
		{name: "in progress, the new cluster leads: record its ID",
			o: with(lost(Observed{Voters: voters(3, 1, 2), Pods: pods(3, 0)}), func(o *Observed) {
				o.InProgress, o.LeaderAnswered, o.LeaderName, o.LeaderClusterID = inProgress, true, "etcd-1", "new"
			}),
			action: ActionRecordClusterID, rule: RuleRecordID},
		{name: "in progress, the new cluster leads: never called off, even with the proofs gone",
			o: with(lost(Observed{Voters: voters(3), Pods: pods(3, 0)}), func(o *Observed) {
				o.InProgress, o.LeaderAnswered, o.LeaderName, o.LeaderClusterID = inProgress, true, "etcd-1", "new"
			}),
			action: ActionRecordClusterID, rule: RuleRecordID},
		{name: "in progress, recorded: replace the pod still running the old cluster",
			o: with(lost(Observed{Voters: voters(3, 1, 2), Pods: pods(3, 0)}), func(o *Observed) {
				o.Pods[1].EtcdRunning, o.Pods[1].ClusterID = true, "new"
				o.InProgress, o.LeaderAnswered, o.LeaderName, o.LeaderClusterID, o.RecordedClusterID = inProgress, true, "etcd-1", "new", "new"
			}),
			action: ActionReplacePod, rule: RuleReplaceOldPod, check: func(t *testing.T, d Decision) {
				if d.Pod != "etcd-0" {
					t.Errorf("pod %q, want etcd-0", d.Pod)
				}
			}},
		{name: "in progress, recorded: replace a pod past its init step that does not answer (the old cluster's member, restarted by its kubelet)",
			o: with(lost(Observed{Voters: voters(3, 1, 2), Pods: pods(3)}), func(o *Observed) {
				o.Pods[1].EtcdRunning, o.Pods[1].ClusterID, o.Pods[1].PastInit = true, "new", true
				o.Pods[0].PastInit, o.Pods[0].EtcdRunning = true, true
				o.InProgress, o.LeaderAnswered, o.LeaderName, o.LeaderClusterID, o.RecordedClusterID = inProgress, true, "etcd-1", "new", "new"
			}),
			action: ActionReplacePod, rule: RuleReplaceOldPod, reason: []string{"deleting pod etcd-0: its init step is over and its etcd does not answer"}},
		{name: "in progress, recorded: a pod past its init step whose etcd is down (restarting) is replaced too",
			o: with(lost(Observed{Voters: voters(3, 1, 2), Pods: pods(3)}), func(o *Observed) {
				o.Pods[1].EtcdRunning, o.Pods[1].ClusterID, o.Pods[1].PastInit = true, "new", true
				o.Pods[2].PastInit = true
				o.InProgress, o.LeaderAnswered, o.LeaderName, o.LeaderClusterID, o.RecordedClusterID = inProgress, true, "etcd-1", "new", "new"
			}),
			action: ActionReplacePod, rule: RuleReplaceOldPod, check: func(t *testing.T, d Decision) {
				if d.Pod != "etcd-2" {
					t.Errorf("pod %q, want etcd-2", d.Pod)
				}
			}},
		{name: "in progress, no old member left: finish",
			o: with(lost(Observed{Voters: voters(3, 1, 2), Pods: pods(3)}), func(o *Observed) {
				o.Pods[1].EtcdRunning, o.Pods[1].ClusterID = true, "new"
				o.InProgress, o.LeaderAnswered, o.LeaderName, o.LeaderClusterID, o.RecordedClusterID = inProgress, true, "etcd-1", "new", "new"
			}),
			action: ActionFinish, rule: RuleFinish},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Plan(tc.o)
			if d.Action != tc.action || d.Rule != tc.rule {
				t.Fatalf("got %s [%s] %q, want %s [%s]", d.Action, d.Rule, d.Reason, tc.action, tc.rule)
			}
			for _, want := range tc.reason {
				if !strings.Contains(d.Reason, want) {
					t.Errorf("reason %q lacks %q", d.Reason, want)
				}
			}
			if tc.check != nil {
				tc.check(t, d)
			}
		})
	}
}

// TestPlanProperties checks, over random observations, the safety rules: a restore is ordered
// only when quorum is lost beyond the grace, no leader answers, a backup store is configured and
// a majority of the recorded voters proved in their current pod that their data is gone, whatever
// the pods are; the member asked to restore is one of them; a recovery in progress goes on only
// while no other leader answers and the proofs still hold; only a pod answering with another
// cluster's ID is ever replaced.
func TestPlanProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	ids := []string{"", "old", "new", "other"}
	for range 200000 {
		n := rng.IntN(8)
		o := Observed{Desired: 1 + rng.IntN(7), QuorumLost: rng.IntN(3) > 0, QuorumLostFor: time.Duration(rng.IntN(90)) * time.Second,
			Grace: 30 * time.Second, LeaderAnswered: rng.IntN(2) == 0, BackupConfigured: rng.IntN(4) > 0,
			RecordedClusterID: ids[rng.IntN(len(ids))], LeaderClusterID: ids[rng.IntN(len(ids))], NewToken: "tok"}
		if rng.IntN(4) == 0 {
			o.ProofUnauthenticated = "no policy"
		}
		o.LeaderName = fmt.Sprintf("etcd-%d", rng.IntN(n+1))
		for i := range n {
			v := Voter{Name: fmt.Sprintf("etcd-%d", i), ID: fmt.Sprintf("%x", i+1), DataGone: rng.IntN(2) == 0, HasData: rng.IntN(4) == 0}
			if rng.IntN(5) > 0 {
				v.PodUID = fmt.Sprintf("uid-%d", rng.IntN(3))
			}
			o.Voters = append(o.Voters, v)
		}
		for i := range 1 + rng.IntN(8) {
			p := Pod{Name: fmt.Sprintf("etcd-%d", i), EtcdRunning: rng.IntN(2) == 0, ClusterID: ids[rng.IntN(len(ids))], Ordinal: i,
				UID: fmt.Sprintf("uid-%d", rng.IntN(3)), ProvedEmpty: rng.IntN(2) == 0, AwaitsBackup: rng.IntN(2) == 0, HasData: rng.IntN(4) == 0}
			if rng.IntN(4) == 0 {
				p.NoSpace = &SpaceShortage{Need: 2, Free: 1}
			}
			o.Pods = append(o.Pods, p)
		}
		if rng.IntN(3) == 0 {
			o.InProgress = &State{Member: fmt.Sprintf("etcd-%d", rng.IntN(n+1)), Token: "tok", OldClusterID: ids[rng.IntN(len(ids))]}
		}
		d := Plan(o)
		where := fmt.Sprintf("%+v → %s [%s] %s", o, d.Action, d.Rule, d.Reason)
		proven := 0
		for _, v := range o.Voters {
			if v.DataGone && !v.HasData && v.PodUID != "" {
				proven++
			}
		}
		if o.ProofUnauthenticated != "" && (d.Action == ActionStart || d.Rule == RuleRestoring || d.Rule == RuleRestoreNoSpace) {
			t.Fatalf("a restore ordered or going on on unauthenticated reports: %s", where)
		}
		switch d.Action {
		case ActionStart:
			if d.Rule == RuleBootstrapFromBackup {
				checkBootstrapOrder(t, o, d, where)
				break
			}
			if o.InProgress != nil || !o.QuorumLost || o.LeaderAnswered || !o.BackupConfigured || o.QuorumLostFor < o.Grace || n == 0 || proven < quorum.Of(n) {
				t.Fatalf("restore ordered unsafely (%d of %d voters proven): %s", proven, n, where)
			}
			found := false
			for _, v := range o.Voters {
				if v.Name == d.State.Member && v.PodUID == d.State.PodUID && v.DataGone && !v.HasData && v.PodUID != "" {
					found = true
				}
			}
			if !found {
				t.Fatalf("the member ordered to restore did not prove it has no data: %s", where)
			}
		case ActionWait:
			if d.Rule == RuleRestoring || d.Rule == RuleRestoreNoSpace {
				s := o.InProgress
				if o.LeaderAnswered && (o.LeaderName != s.Member || o.LeaderClusterID == s.OldClusterID) {
					t.Fatalf("a recovery goes on while another cluster's leader answers: %s", where)
				}
				restoringIsVoter := 0
				for _, v := range o.Voters {
					if v.Name == s.Member && !(v.DataGone && !v.HasData && v.PodUID != "") {
						restoringIsVoter = 1
					}
				}
				if n > 0 && proven+restoringIsVoter < quorum.Of(n) {
					t.Fatalf("a recovery goes on while the proofs no longer cover a majority: %s", where)
				}
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
		case ActionCallOff:
			if o.InProgress == nil {
				t.Fatalf("called off without a recovery: %s", where)
			}
		}
		if d.Reason == "" || d.Rule == "" {
			t.Fatalf("decision without reason or rule: %s", where)
		}
	}
}
