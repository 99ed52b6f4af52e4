package recovery

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// awaitingPods are n member pods whose current incarnation proved an empty data dir and waits to
// bootstrap from the backup.
func awaitingPods(n int) []Pod {
	var out []Pod
	for i := range n {
		out = append(out, Pod{Name: fmt.Sprintf("etcd-%d", i), Ordinal: i, UID: fmt.Sprintf("uid-%d", i), ProvedEmpty: true, AwaitsBackup: true,
			State: "init step found Empty data: wait/bootstrap-from-backup"})
	}
	return out
}

func TestPlanBootstrap(t *testing.T) {
	fresh := func(f func(o *Observed)) Observed {
		o := Observed{Desired: 3, BackupConfigured: true, NewToken: "tok", Pods: awaitingPods(3)}
		if f != nil {
			f(&o)
		}
		return o
	}
	for _, tc := range []struct {
		name    string
		o       Observed
		action  Action
		rule    RuleID
		member  string
		reasons []string
	}{
		{name: "all three proved empty and wait: member 0 restores", o: fresh(nil), action: ActionStart, rule: RuleBootstrapFromBackup, member: "etcd-0",
			reasons: []string{"3 of 3 members proved", "restoring etcd-0", "to 3 through learners"}},
		{name: "the member 0 pod first in the list or not: lowest ordinal restores", o: fresh(func(o *Observed) {
			o.Pods[0], o.Pods[2] = o.Pods[2], o.Pods[0]
		}), action: ActionStart, rule: RuleBootstrapFromBackup, member: "etcd-0"},
		{name: "a single-member Etcd", o: fresh(func(o *Observed) { o.Desired, o.Pods = 1, awaitingPods(1) }),
			action: ActionStart, rule: RuleBootstrapFromBackup, member: "etcd-0"},
		{name: "all proved empty, but the reports are not authenticated: wait", o: fresh(func(o *Observed) { o.ProofUnauthenticated = "no policy" }),
			action: ActionWait, rule: RuleProofUnauthenticated, reasons: []string{"3 of 3 members proved", "not authenticated: no policy"}},
		{name: "one member has not reported yet: wait, naming it", o: fresh(func(o *Observed) {
			o.Pods[2].ProvedEmpty, o.Pods[2].AwaitsBackup, o.Pods[2].State = false, false, "init step of this pod has not reported yet"
		}), action: ActionWait, rule: RuleBootstrapWait, reasons: []string{"2 of 3 members", "etcd-2: init step of this pod has not reported yet"}},
		{name: "spec.replicas past any Etcd's size: wait, promptly", o: fresh(func(o *Observed) { o.Desired = 2147483647 }),
			action: ActionWait, rule: RuleBootstrapWait, reasons: []string{"spec.replicas 2147483647: an Etcd has at most 9 members", "member 8: no pod"}},
		{name: "one member has no pod: wait", o: fresh(func(o *Observed) { o.Pods = o.Pods[:2] }),
			action: ActionWait, rule: RuleBootstrapWait, reasons: []string{"member 2: no pod"}},
		{name: "one member found data: never", o: fresh(func(o *Observed) {
			o.Pods[1].ProvedEmpty, o.Pods[1].AwaitsBackup, o.Pods[1].HasData = false, false, true
		}), action: ActionWait, rule: RuleBootstrapWait, reasons: []string{"etcd-1 found data", "nothing is restored"}},
		{name: "one member found data but still claims to wait: never", o: fresh(func(o *Observed) { o.Pods[1].HasData = true }),
			action: ActionWait, rule: RuleBootstrapWait, reasons: []string{"etcd-1 found data"}},
		{name: "a member runs etcd: never", o: fresh(func(o *Observed) { o.Pods[2].EtcdRunning = true }),
			action: ActionWait, rule: RuleBootstrapWait, reasons: []string{"etcd-2 runs etcd"}},
		{name: "a pod beyond spec.replicas runs etcd: never", o: fresh(func(o *Observed) {
			o.Pods = append(o.Pods, Pod{Name: "etcd-3", Ordinal: 3, UID: "uid-3", EtcdRunning: true, ClusterID: "c"})
		}), action: ActionWait, rule: RuleBootstrapWait, reasons: []string{"etcd-3 runs etcd"}},
		{name: "a report of an older pod incarnation proves nothing", o: fresh(func(o *Observed) {
			// The controller sets ProvedEmpty only for the current incarnation's report.
			o.Pods[1].ProvedEmpty, o.Pods[1].AwaitsBackup, o.Pods[1].State = false, false, "init step of this pod has not reported yet"
		}), action: ActionWait, rule: RuleBootstrapWait},
		{name: "cluster ID recorded: never (the majority-loss rules decide)", o: fresh(func(o *Observed) { o.RecordedClusterID = "c1" }),
			action: ActionNone, rule: RuleNotNeeded},
		{name: "voters recorded: never", o: fresh(func(o *Observed) { o.Voters = voters(3, 0, 1, 2) }),
			action: ActionNone, rule: RuleNotNeeded},
		{name: "a leader answers: the cluster formed, nothing restored", o: fresh(func(o *Observed) {
			o.LeaderAnswered, o.LeaderName, o.LeaderClusterID = true, "etcd-1", "c1"
		}), action: ActionNone, rule: RuleLeaderAnswers},
		{name: "spec.backup names no store now: a person decides", o: fresh(func(o *Observed) { o.BackupConfigured = false }),
			action: ActionWait, rule: RuleNoBackup},
		{name: "no member waits for the backup: not this rule", o: fresh(func(o *Observed) {
			for i := range o.Pods {
				o.Pods[i].AwaitsBackup = false
			}
		}), action: ActionNone, rule: RuleNotNeeded},
		{name: "ordered: member 0 restores, then it leads: record the new cluster", o: fresh(func(o *Observed) {
			o.InProgress = &State{Member: "etcd-0", PodUID: "uid-0", Token: "tok"}
			o.LeaderAnswered, o.LeaderName, o.LeaderID, o.LeaderClusterID = true, "etcd-0", "a1", "c9"
		}), action: ActionRecordClusterID, rule: RuleRecordID},
		{name: "ordered, recorded: finish, the learners come through membership", o: fresh(func(o *Observed) {
			o.InProgress = &State{Member: "etcd-0", PodUID: "uid-0", Token: "tok"}
			o.LeaderAnswered, o.LeaderName, o.LeaderID, o.LeaderClusterID, o.RecordedClusterID = true, "etcd-0", "a1", "c9", "c9"
		}), action: ActionFinish, rule: RuleFinish},
		{name: "ordered, member 0's pod recreated before it restored: call off, its new pod proves again", o: fresh(func(o *Observed) {
			o.InProgress = &State{Member: "etcd-0", PodUID: "uid-old", Token: "tok"}
		}), action: ActionCallOff, rule: RuleCallOff, reasons: []string{"now uid-0, the order named uid-old"}},
		{name: "ordered, member 0's pod restoring: wait", o: fresh(func(o *Observed) {
			o.InProgress = &State{Member: "etcd-0", PodUID: "uid-0", Token: "tok"}
		}), action: ActionWait, rule: RuleRestoring},
		{name: "majority-loss order, pod recreated: not this call-off (the voters' rules decide)", o: fresh(func(o *Observed) {
			o.Voters, o.RecordedClusterID = voters(3, 0, 1), "old"
			o.InProgress = &State{Member: "etcd-0", PodUID: "uid-old", Token: "tok", OldClusterID: "old"}
		}), action: ActionWait, rule: RuleRestoring},
		{name: "ordered, another member leads a cluster: call off", o: fresh(func(o *Observed) {
			o.InProgress = &State{Member: "etcd-0", PodUID: "uid-0", Token: "tok"}
			o.LeaderAnswered, o.LeaderName, o.LeaderClusterID = true, "etcd-1", "c7"
		}), action: ActionCallOff, rule: RuleCallOff},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Plan(tc.o)
			if d.Action != tc.action || d.Rule != tc.rule {
				t.Fatalf("got %s [%s] %q, want %s [%s]", d.Action, d.Rule, d.Reason, tc.action, tc.rule)
			}
			if tc.member != "" && (d.State == nil || d.State.Member != tc.member || d.State.PodUID != "uid-0" || d.State.Token != "tok" || d.State.OldClusterID != "") {
				t.Fatalf("order %+v, want %s (uid-0, token tok, no old cluster)", d.State, tc.member)
			}
			for _, r := range tc.reasons {
				if !strings.Contains(d.Reason, r) {
					t.Errorf("reason %q lacks %q", d.Reason, r)
				}
			}
		})
	}
}

// TestPlanBootstrapProperties: over random observations shaped like a new cluster (no cluster
// ID, no voters, most pods awaiting the backup), a bootstrap from the backup is ordered only when
// every member of spec.replicas proved an empty data dir from its current pod and waits for it,
// no pod runs etcd or found data, no leader answers and a store is configured; member 0 restores.
func TestPlanBootstrapProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	ordered := 0
	for range 100000 {
		o := Observed{Desired: 1 + rng.IntN(5), BackupConfigured: rng.IntN(8) > 0, LeaderAnswered: rng.IntN(8) == 0, NewToken: "tok",
			LeaderName: "etcd-0", LeaderClusterID: "c1"}
		if rng.IntN(8) == 0 {
			o.RecordedClusterID = "c1"
		}
		if rng.IntN(8) == 0 {
			o.Voters = voters(1 + rng.IntN(3))
		}
		for i := range o.Desired + rng.IntN(2) - rng.IntN(2) {
			p := Pod{Name: fmt.Sprintf("etcd-%d", i), Ordinal: i, UID: fmt.Sprintf("uid-%d", i), ProvedEmpty: rng.IntN(10) > 0, AwaitsBackup: rng.IntN(10) > 0,
				HasData: rng.IntN(20) == 0, EtcdRunning: rng.IntN(20) == 0}
			if rng.IntN(20) == 0 {
				p.UID = ""
			}
			o.Pods = append(o.Pods, p)
		}
		rng.Shuffle(len(o.Pods), func(i, j int) { o.Pods[i], o.Pods[j] = o.Pods[j], o.Pods[i] })
		d := Plan(o)
		where := fmt.Sprintf("%+v → %s [%s] %s", o, d.Action, d.Rule, d.Reason)
		if d.Rule == RuleBootstrapFromBackup {
			ordered++
			checkBootstrapOrder(t, o, d, where)
		}
		if d.Action == ActionStart && d.Rule != RuleBootstrapFromBackup {
			t.Fatalf("a new cluster's observation ordered another restore: %s", where)
		}
	}
	if ordered == 0 {
		t.Fatal("no observation ordered a bootstrap: the property was never exercised")
	}
	t.Logf("%d bootstraps ordered", ordered)
}

// checkBootstrapOrder fails unless a bootstrap from the backup was safe to order.
func checkBootstrapOrder(t *testing.T, o Observed, d Decision, where string) {
	t.Helper()
	if d.Action != ActionStart || o.InProgress != nil || o.RecordedClusterID != "" || len(o.Voters) > 0 || o.LeaderAnswered || !o.BackupConfigured {
		t.Fatalf("bootstrap from the backup ordered for a cluster that formed, or without a store: %s", where)
	}
	proven := map[int]Pod{}
	for _, p := range o.Pods {
		if p.HasData || p.EtcdRunning || p.ClusterID != "" {
			t.Fatalf("bootstrap from the backup ordered while %s holds data or runs etcd: %s", p.Name, where)
		}
		if p.ProvedEmpty && p.AwaitsBackup && p.UID != "" {
			proven[p.Ordinal] = p
		}
	}
	for i := range o.Desired {
		if _, ok := proven[i]; !ok {
			t.Fatalf("bootstrap from the backup ordered without member %d's proof: %s", i, where)
		}
	}
	if d.State == nil || d.State.Member != proven[0].Name || d.State.PodUID != proven[0].UID || d.State.OldClusterID != "" {
		t.Fatalf("bootstrap order %+v is not for member 0's current pod: %s", d.State, where)
	}
}
