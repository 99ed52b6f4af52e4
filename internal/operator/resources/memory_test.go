package resources

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// TestMemberContainersHaveMemoryLimits: the member-agent and the init step are bounded, their
// limits hold the measured peaks (memory.go) and the Go runtime is told to collect below them.
func TestMemberContainersHaveMemoryLimits(t *testing.T) {
	sts, err := StatefulSet(testEtcd(3), Settings{MemberAgentImage: "img"})
	if err != nil {
		t.Fatal(err)
	}
	pod := sts.Spec.Template.Spec
	tests := []struct {
		container *corev1.Container
		// measuredPeak is the peak resident set measured for its heaviest job.
		measuredPeak string
	}{
		{containerNamed(pod.Containers, MemberAgentContainerName), "184Mi"},
		{containerNamed(pod.InitContainers, MemberInitContainerName), "566Mi"},
	}
	for _, tt := range tests {
		t.Run(tt.container.Name, func(t *testing.T) {
			limit, ok := tt.container.Resources.Limits[corev1.ResourceMemory]
			if !ok {
				t.Fatal("no memory limit")
			}
			if req := tt.container.Resources.Requests[corev1.ResourceMemory]; req.IsZero() || req.Cmp(limit) > 0 {
				t.Errorf("memory request %s, want one at most the limit %s", req.String(), limit.String())
			}
			if peak := resource.MustParse(tt.measuredPeak); limit.Cmp(peak) <= 0 {
				t.Errorf("limit %s does not hold the measured peak %s", limit.String(), peak.String())
			}
			var goLimit string
			for _, e := range tt.container.Env {
				if e.Name == "GOMEMLIMIT" {
					goLimit = e.Value
				}
			}
			q, err := resource.ParseQuantity(strings.TrimSuffix(goLimit, "B"))
			if err != nil || q.Cmp(limit) >= 0 || q.IsZero() {
				t.Errorf("GOMEMLIMIT %q (%v), want one below the limit %s", goLimit, err, limit.String())
			}
		})
	}
}
