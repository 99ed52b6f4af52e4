package resources

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Memory of the member pod's own containers, the member-agent and the member init step (one
// binary). Measured by TestPeakMemory (test/bench/memory, each job alone in a child process) on
// 2026-11-26 with a 256 MiB keyspace of 4 KiB values (a 385 MiB database):
//
//   - member-agent, a full backup (stream, spool, upload to versitygw, verify): 81 MiB peak
//     resident, 46 MiB anonymous; a delta of 16 MiB of values (4096 events, 22 MiB uploaded):
//     184 MiB resident, 150 MiB anonymous, since the backup loop holds and encodes the events in
//     memory (about 9 times the values);
//   - init step, a restore of that full snapshot and delta: 566 MiB peak resident, of which
//     145 MiB anonymous; the rest is the database's pages mapped by bbolt, page cache the kernel
//     reclaims under the limit (a restore of the full snapshot alone: 442 MiB, 22 MiB
//     anonymous).
//
// The limits leave a margin of 2.8 times the agent's peak (512 MiB) and 1.8 times the restore's
// peak resident, 7 times its anonymous memory (1 GiB). The restore engine is being rewritten to
// stream (bounded memory); these figures are re-measured after it.
//
// GOMEMLIMIT, three quarters of each limit, makes the Go runtime collect harder as it nears the
// limit instead of growing into it: nearly all anonymous memory here is Go heap.
const (
	memberAgentMemoryRequest = "64Mi"
	memberAgentMemoryLimit   = "512Mi"
	memberAgentGoMemLimit    = "384MiB"
	memberInitMemoryRequest  = "64Mi"
	memberInitMemoryLimit    = "1Gi"
	memberInitGoMemLimit     = "768MiB"
)

// memberAgentResources bound the member-agent: a full and a delta backup fit (see above).
func memberAgentResources() corev1.ResourceRequirements {
	return corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse(memberAgentMemoryRequest)},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(memberAgentMemoryLimit)},
	}
}

// memberInitResources bound the init step: a restore fits. Its request is what deciding how to
// start takes: a restore is rare, and the request of an init container is reserved for the
// whole pod when it exceeds the other containers' sum.
func memberInitResources() corev1.ResourceRequirements {
	return corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(memberInitMemoryRequest)},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(memberInitMemoryLimit)},
	}
}

func goMemLimit(v string) corev1.EnvVar { return corev1.EnvVar{Name: "GOMEMLIMIT", Value: v} }
