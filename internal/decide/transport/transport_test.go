package transport

import (
	"testing"
)

var allStages = []Stage{Plain, Adding, TLS}

func TestPlan(t *testing.T) {
	plain, tls := Final(false, false), Final(true, true)
	for _, tt := range []struct {
		name    string
		o       Observed
		want    Stages
		rule    string
		refused bool
	}{
		{"new plain", Observed{Desired: plain}, plain, string(RuleNew), false},
		{"new TLS", Observed{Desired: tls}, tls, string(RuleNew), false},
		{"steady", Observed{Desired: tls, Running: &tls, RolledOut: true}, tls, string(RuleSteady), false},
		{"TLS added: material first", Observed{Desired: tls, Running: &plain, RolledOut: true}, Stages{Adding, Adding}, string(RuleAdd), false},
		{"adding, not rolled out: wait", Observed{Desired: tls, Running: &Stages{Adding, Adding}}, Stages{Adding, Adding}, string(RuleWaitRollout), false},
		{"adding, rolled out: switch", Observed{Desired: tls, Running: &Stages{Adding, Adding}, RolledOut: true}, tls, string(RuleSwitch), false},
		{"peer only added", Observed{Desired: Final(false, true), Running: &plain, RolledOut: true}, Stages{Plain, Adding}, string(RuleAdd), false},
		{"client added while peer adds: client first catches up", Observed{Desired: tls, Running: &Stages{Plain, Adding}, RolledOut: true}, Stages{Adding, Adding}, string(RuleAdd), false},
		{"adding called off", Observed{Desired: plain, Running: &Stages{Adding, Adding}}, plain, string(RuleCalledOff), false},
		{"TLS removed: refused", Observed{Desired: plain, Running: &tls, RolledOut: true}, tls, string(RuleRefuseRemoval), true},
		{"peer TLS removed, client added: refused, nothing changes", Observed{Desired: Final(true, false), Running: &Stages{Plain, TLS}, RolledOut: true}, Stages{Plain, TLS}, string(RuleRefuseRemoval), true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := Plan(tt.o)
			if d.Render != tt.want || string(d.Rule) != tt.rule || d.Refused != tt.refused {
				t.Errorf("Plan = %+v, want render %v rule %s refused %v", d, tt.want, tt.rule, tt.refused)
			}
			if d.Reason == "" {
				t.Error("no reason")
			}
		})
	}
}

// TestPlanNeverCutsAMemberOff checks every observation: on running members, TLS-only is rendered
// for a kind only if every member already holds the material (it ran adding and the rollout is
// complete) or TLS already runs; TLS once running is never taken away; each rendered stage is the
// running one or one step from it; and with rollouts completing, the desired stages are reached
// in at most two steps.
func TestPlanNeverCutsAMemberOff(t *testing.T) {
	for _, dc := range []bool{false, true} {
		for _, dp := range []bool{false, true} {
			desired := Final(dc, dp)
			for _, rc := range allStages {
				for _, rp := range allStages {
					run := Stages{rc, rp}
					for _, rolled := range []bool{false, true} {
						d := Plan(Observed{Desired: desired, Running: &run, RolledOut: rolled})
						for _, k := range []struct {
							name           string
							from, to, want Stage
						}{{"client", rc, d.Render.Client, desired.Client}, {"peer", rp, d.Render.Peer, desired.Peer}} {
							if k.to == TLS && k.from != TLS && (k.from != Adding || !rolled) {
								t.Errorf("%s: %v rolled=%v desired %v: rendered %s TLS-only from %s", d.Rule, run, rolled, desired, k.name, k.from)
							}
							if k.from == TLS && k.to != TLS {
								t.Errorf("%s: %v desired %v: took TLS from %s traffic", d.Rule, run, desired, k.name)
							}
							if k.from == Plain && k.to == TLS {
								t.Errorf("%s: %s jumped from plain to TLS", d.Rule, k.name)
							}
						}
					}
					// Convergence: with each rollout completing, at most two steps.
					if (rc == TLS && !dc) || (rp == TLS && !dp) {
						continue // removal: refused, checked above
					}
					cur := run
					for i := 0; i < 3 && cur != desired; i++ {
						cur = Plan(Observed{Desired: desired, Running: &cur, RolledOut: true}).Render
					}
					if cur != desired {
						t.Errorf("from %v never reached %v (stuck at %v)", run, desired, cur)
					}
				}
			}
		}
	}
}
