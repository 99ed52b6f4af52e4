package ruleid

import (
	"regexp"
	"testing"
)

// conditionReasonPattern is what the apiserver accepts as a condition reason.
var conditionReasonPattern = regexp.MustCompile(`^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$`)

func TestCamelCase(t *testing.T) {
	cases := []struct {
		rule ID
		want string
	}{
		{"done", "Done"},
		{"non-participating/dead", "NonParticipatingDead"},
		{"non-participating/alive-unready", "NonParticipatingAliveUnready"},
		{"wait/updated-not-participating", "WaitUpdatedNotParticipating"},
		{"participating/unknown-role", "ParticipatingUnknownRole"},
		{"single-node", "SingleNode"},
		{"wait/no-update-revision", "WaitNoUpdateRevision"},
		{"scale-out/add-learner", "ScaleOutAddLearner"},
		{"recovery/wait-members-with-data", "RecoveryWaitMembersWithData"},
		{"defrag/wait/rollout-in-flight", "DefragWaitRolloutInFlight"},
		{"hold-ondelete/updated-not-ready", "HoldOndeleteUpdatedNotReady"},
		{"", "Unknown"},
		{"/-", "Unknown"},
		{"3rd/rule", "Rule3rdRule"},
		{"wait/ümlaut", "WaitMlaut"},
	}
	for _, tc := range cases {
		t.Run(string(tc.rule), func(t *testing.T) {
			got := tc.rule.CamelCase()
			if got != tc.want {
				t.Fatalf("CamelCase(%q) = %q, want %q", tc.rule, got, tc.want)
			}
			if !conditionReasonPattern.MatchString(got) {
				t.Fatalf("CamelCase(%q) = %q is not a valid condition reason", tc.rule, got)
			}
		})
	}
}
