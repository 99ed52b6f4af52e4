package seeding

import (
	"strings"
	"testing"
)

// fresh is a joiner whose store holds a full snapshot of the running cluster taken 100
// revisions ago, fetched (its database at index 9900, term 3).
func fresh() Observed {
	return Observed{
		Joining:          true,
		BackupConfigured: true,
		EtcdUID:          "uid-1",
		Leader:           Leader{Known: true, ClusterID: 0xabc, Revision: 5000, AppliedIndex: 10000, Term: 4},
		Snapshot: Snapshot{Found: true, Name: "Full-00000000-00004900-1", Revision: 4900,
			OriginRecorded: true, OriginClusterID: "abc", OriginEtcdUID: "uid-1", Index: 9900, Term: 3},
	}
}

func TestDecide(t *testing.T) {
	cases := []struct {
		name   string
		change func(o *Observed)
		seed   bool
		rule   RuleID
	}{
		{"a fresh snapshot of this cluster", func(o *Observed) {}, true, RuleSeed},
		{"before the fetch, revisions close enough", func(o *Observed) { o.Snapshot.Index, o.Snapshot.Term = 0, 0 }, true, RuleSeed},
		{"not joining (restart, restore, bootstrap)", func(o *Observed) { o.Joining = false }, false, RuleNotJoining},
		{"no backup store", func(o *Observed) { o.BackupConfigured = false }, false, RuleNoStore},
		{"data kept aside (an earlier start was set aside)", func(o *Observed) { o.DataKeptAside = true }, false, RuleDataKeptAside},
		{"no full snapshot", func(o *Observed) { o.Snapshot = Snapshot{} }, false, RuleNoSnapshot},
		{"leader unknown", func(o *Observed) { o.Leader = Leader{} }, false, RuleLeaderUnknown},
		{"no origin record (etcd-druid's backup)", func(o *Observed) { o.Snapshot.OriginRecorded, o.Snapshot.OriginClusterID = false, "" }, false, RuleOriginUnknown},
		{"taken before a restore (another cluster ID)", func(o *Observed) { o.Snapshot.OriginClusterID = "def" }, false, RuleOtherCluster},
		{"taken of another Etcd", func(o *Observed) { o.Snapshot.OriginEtcdUID = "uid-2" }, false, RuleOtherCluster},
		{"index ahead of the leader", func(o *Observed) { o.Snapshot.Index = 10001 }, false, RuleAhead},
		{"term ahead of the leader", func(o *Observed) { o.Snapshot.Term = 5 }, false, RuleAhead},
		{"revision ahead of the leader", func(o *Observed) { o.Snapshot.Revision = 5001 }, false, RuleAhead},
		{"too many entries behind", func(o *Observed) { o.Snapshot.Index = 10000 - 2501 }, false, RuleTooFarBehind},
		{"exactly half the leader's log behind", func(o *Observed) { o.Snapshot.Index = 10000 - 2500 }, true, RuleSeed},
		{"before the fetch, too many revisions behind", func(o *Observed) { o.Snapshot.Index, o.Snapshot.Revision = 0, 5000-2501 }, false, RuleTooFarBehind},
		{"a larger catch-up window", func(o *Observed) { o.Snapshot.Index, o.CatchUpEntries = 10000-2501, 10000 }, true, RuleSeed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := fresh()
			c.change(&o)
			d := Decide(o)
			if d.Seed != c.seed || d.Rule != c.rule {
				t.Fatalf("Decide = %v %s (%s), want %v %s", d.Seed, d.Rule, d.Reason, c.seed, c.rule)
			}
			if d.Reason == "" {
				t.Fatal("no reason")
			}
		})
	}
}

// TestOnlyTheLastRuleSeeds: every rule but the catch-all says no, so a rule added in between can
// only make seeding rarer.
func TestOnlyTheLastRuleSeeds(t *testing.T) {
	for _, r := range rules {
		if d, ok := r(fresh()); ok {
			t.Fatalf("rule %s decides on a seedable observation: %+v", d.Rule, d)
		}
	}
	if d := Decide(fresh()); !strings.Contains(d.Reason, "100 entries") {
		t.Fatalf("reason %q does not give the distance", d.Reason)
	}
}
