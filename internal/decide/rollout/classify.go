package rollout

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/etcd-conductor/etcd-conductor/internal/contract/memberpod"
)

// deadWaitingReasons are waiting reasons after which the container does not come up again
// without a new pod (or a human). DEP-07 lists the first five; the rest fail the same way.
var deadWaitingReasons = map[string]bool{
	"CrashLoopBackOff":           true,
	"RunContainerError":          true,
	"ImagePullBackOff":           true,
	"ErrImagePull":               true,
	"CreateContainerConfigError": true,
	"InvalidImageName":           true,
	"ErrImageNeverPull":          true,
	"CreateContainerError":       true,
	"PreStartHookError":          true,
	"PostStartHookError":         true,
}

// ClassifyContainer classifies the pod's etcd container; the package documentation lists how
// every case maps.
func ClassifyContainer(pod *corev1.Pod) ContainerClass {
	status, ok := etcdContainerStatus(pod)
	if !ok {
		switch pod.Status.Phase {
		case corev1.PodFailed, corev1.PodSucceeded:
			return ContainerDead
		case corev1.PodPending, "":
			return ContainerTransient
		default:
			return ContainerUnknown
		}
	}
	state := status.State
	switch {
	case state.Terminated != nil:
		return ContainerDead
	case state.Running != nil:
		return ContainerAlive
	case state.Waiting != nil && deadWaitingReasons[state.Waiting.Reason]:
		return ContainerDead
	default:
		// ContainerCreating, PodInitializing, any reason we do not know, or no state at all
		// (which the API defines as waiting): the container is still on its way up.
		return ContainerTransient
	}
}

// isParticipating reports whether the etcd container is Ready.
func isParticipating(pod *corev1.Pod) bool {
	status, ok := etcdContainerStatus(pod)
	return ok && status.Ready
}

func etcdContainerStatus(pod *corev1.Pod) (corev1.ContainerStatus, bool) {
	for _, s := range pod.Status.ContainerStatuses {
		if s.Name == memberpod.EtcdContainerName { // its readiness and state describe the member
			return s, true
		}
	}
	return corev1.ContainerStatus{}, false
}

// IsOutdated reports whether the pod was created from another revision than the update
// revision. Pods updated to an earlier target of an interrupted rollout are outdated too.
func IsOutdated(p PodState, updateRevision string) bool {
	return p.Revision != updateRevision
}
