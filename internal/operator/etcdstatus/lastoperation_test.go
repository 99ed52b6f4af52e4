package etcdstatus

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/roles"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/rollout"
)

func TestRolloutOperationRoundTrip(t *testing.T) {
	at := metav1.NewTime(now)
	for _, tc := range []struct {
		name        string
		d           rollout.Decision
		res         roles.Resolution
		needs       bool
		description string
		state       string
	}{
		{"wait", rollout.Decision{Action: rollout.ActionWait, Rule: rollout.RuleUpdatedNotParticipating, Reason: "waiting for etcd-main-2 (updated)"}, roles.Resolution{Source: roles.SourceNone}, false,
			"waiting for etcd-main-2 (updated) [rollout/wait/updated-not-participating]", OperationProcessing},
		{"delete with direct roles", rollout.Decision{Action: rollout.ActionDelete, Rule: rollout.RuleParticipatingFollower, Reason: "deleting etcd-main-0"}, roles.Resolution{Source: roles.SourceDirect}, true,
			"deleting etcd-main-0 [rollout/participating/follower] (roles: direct)", OperationProcessing},
		{"delete with lease roles", rollout.Decision{Action: rollout.ActionDelete, Rule: rollout.RuleParticipatingLeader, Reason: "deleting etcd-main-0"}, roles.Resolution{Source: roles.SourceLease, Detail: "members not asked: x [y]"}, true,
			"deleting etcd-main-0 [rollout/participating/leader] (roles: lease: members not asked: x [y])", OperationProcessing},
		{"done", rollout.Decision{Action: rollout.ActionDone, Rule: rollout.RuleDone, Reason: "all 3 pods run revision r"}, roles.Resolution{Source: roles.SourceNone}, false,
			"all 3 pods run revision r [rollout/done]", OperationSucceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			op := RolloutOperation(tc.d, tc.res, tc.needs, "rev-new", at)
			if op.Description != tc.description || op.State != tc.state || op.Type != OperationRollout || op.RunID != "rev-new" {
				t.Fatalf("RolloutOperation() = %+v, want description %q state %s", op, tc.description, tc.state)
			}
			if rule, ok := RolloutRule(&op, "rev-new"); !ok || rule != tc.d.Rule {
				t.Fatalf("RolloutRule() = %q, %v; want %q", rule, ok, tc.d.Rule)
			}
			if _, ok := RolloutRule(&op, "rev-other"); ok {
				t.Fatal("RolloutRule() accepted a decision for another revision")
			}
		})
	}
	for _, desc := range []string{"", "no rule here", "reason [", "reason []", "reason [Not A Rule]"} {
		if rule, ok := RolloutRule(&druidv1alpha1.LastOperation{Type: OperationRollout, RunID: "r", Description: desc}, "r"); ok {
			t.Errorf("RolloutRule(%q) = %q, want none", desc, rule)
		}
	}
}
