package nodesim

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// statusLoop writes the pod status whenever it changed, through the status
// subresource; it makes a final write after the containers stopped.
func (w *podWorker) statusLoop() {
	var last *corev1.PodStatus
	lastReady := false
	resync := time.NewTicker(10 * time.Second)
	defer resync.Stop()
	for {
		final := false
		select {
		case <-w.statusDirty:
		case <-resync.C:
		case <-w.stopCh:
			final = true
		}
		if !final {
			// Coalesce bursts (a container start changes several fields).
			time.Sleep(20 * time.Millisecond)
		} else {
			w.waitTerminated()
		}
		st, ready := w.computeStatus()
		if ready != lastReady {
			lastReady = ready
			w.updateDNS()
		}
		if last == nil || !equality.Semantic.DeepEqual(*last, st) {
			if err := w.writeStatus(st); err != nil {
				if apierrors.IsNotFound(err) {
					if !final {
						continue
					}
					return
				}
				w.log.Error(err, "writing pod status")
				if !final {
					w.markDirtyLater()
					continue
				}
			} else {
				last = &st
			}
		}
		if final {
			return
		}
	}
}

func (w *podWorker) markDirtyLater() {
	go func() {
		time.Sleep(time.Second)
		w.markDirty()
	}()
}

// waitTerminated blocks until terminate has recorded the terminal phase, or
// the simulator abandons the pod (then there is nothing left to report).
func (w *podWorker) waitTerminated() {
	for {
		w.mu.Lock()
		done := w.terminal != "" || w.abandoned || w.removed
		w.mu.Unlock()
		if done {
			return
		}
		select {
		case <-w.statusDirty:
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (w *podWorker) writeStatus(st corev1.PodStatus) error {
	w.mu.Lock()
	abandoned, removed := w.abandoned, w.removed
	w.mu.Unlock()
	if abandoned || removed {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	pods := w.s.client.CoreV1().Pods(w.pod.Namespace)
	pod := w.currentPod().DeepCopy()
	for attempt := 0; attempt < 5; attempt++ {
		if pod.UID != w.uid {
			return apierrors.NewNotFound(corev1.Resource("pods"), pod.Name)
		}
		mergeStatus(&pod.Status, st)
		_, err := pods.UpdateStatus(ctx, pod, metav1.UpdateOptions{})
		if err == nil || !apierrors.IsConflict(err) {
			return err
		}
		pod, err = pods.Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
	}
	return fmt.Errorf("pod status update kept conflicting")
}

// ownedConditions are the pod conditions kubelet maintains; others (e.g.
// readiness gates, DisruptionTarget) are kept as found.
var ownedConditions = map[corev1.PodConditionType]bool{
	corev1.PodReadyToStartContainers: true,
	corev1.PodInitialized:            true,
	corev1.ContainersReady:           true,
	corev1.PodReady:                  true,
}

func mergeStatus(dst *corev1.PodStatus, src corev1.PodStatus) {
	conds := make([]corev1.PodCondition, 0, len(dst.Conditions)+len(src.Conditions))
	for _, c := range dst.Conditions {
		if !ownedConditions[c.Type] {
			conds = append(conds, c)
		}
	}
	conds = append(conds, src.Conditions...)
	dst.Conditions = conds
	dst.Phase = src.Phase
	dst.HostIP, dst.HostIPs = src.HostIP, src.HostIPs
	dst.PodIP, dst.PodIPs = src.PodIP, src.PodIPs
	dst.StartTime = src.StartTime
	dst.InitContainerStatuses = src.InitContainerStatuses
	dst.ContainerStatuses = src.ContainerStatuses
}

// computeStatus derives the pod status from the worker's state, following
// kubelet's generateAPIPodStatus. It also reports whether the pod is Ready.
func (w *podWorker) computeStatus() (corev1.PodStatus, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	pod := w.pod
	st := corev1.PodStatus{StartTime: &w.startTime}
	st.HostIP = w.s.network.GatewayIP()
	st.HostIPs = []corev1.HostIP{{IP: st.HostIP}}
	if w.net != nil {
		st.PodIP = w.net.ip.String()
		st.PodIPs = []corev1.PodIP{{IP: st.PodIP}}
	}
	specImage := map[string]string{}
	for _, c := range pod.Spec.InitContainers {
		specImage[c.Name] = c.Image
	}
	for _, c := range pod.Spec.Containers {
		specImage[c.Name] = c.Image
	}
	statusOf := func(c *container) corev1.ContainerStatus {
		started := c.started
		cs := corev1.ContainerStatus{
			Name:                 c.name,
			State:                c.state,
			LastTerminationState: c.last,
			Ready:                c.ready,
			RestartCount:         c.restarts,
			Image:                specImage[c.name],
			ImageID:              c.imageID,
			ContainerID:          c.containerID,
			Started:              &started,
		}
		if cs.State.Waiting != nil && w.sandboxErr != "" && cs.State.Waiting.Reason == "ContainerCreating" {
			cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: "ContainerCreating", Message: w.sandboxErr}
		}
		return cs
	}
	initialized := true
	initFailed := false
	for _, c := range w.init {
		st.InitContainerStatuses = append(st.InitContainerStatuses, statusOf(c))
		if !c.succeeded {
			initialized = false
			if t := c.state.Terminated; t != nil && t.ExitCode != 0 && pod.Spec.RestartPolicy == corev1.RestartPolicyNever {
				initFailed = true
			}
		}
	}
	var unready []string
	for _, c := range w.containers {
		st.ContainerStatuses = append(st.ContainerStatuses, statusOf(c))
		if !c.ready {
			unready = append(unready, c.name)
		}
	}
	sort.Strings(unready)

	switch {
	case w.terminal != "":
		st.Phase = w.terminal
	case initFailed:
		st.Phase = corev1.PodFailed
	case !initialized:
		st.Phase = corev1.PodPending
	default:
		st.Phase = phase(pod.Spec.RestartPolicy, st.ContainerStatuses)
	}

	now := metav1.Now()
	setCond := func(t corev1.PodConditionType, ok bool, reason, msg string) {
		status := corev1.ConditionFalse
		if ok {
			status, reason, msg = corev1.ConditionTrue, "", ""
		}
		prev, had := w.conditions[t]
		c := corev1.PodCondition{Type: t, Status: status, Reason: reason, Message: msg, LastTransitionTime: now}
		if had && prev.Status == status {
			c.LastTransitionTime = prev.LastTransitionTime
		}
		w.conditions[t] = c
		st.Conditions = append(st.Conditions, c)
	}
	terminated := w.terminal != ""
	setCond(corev1.PodReadyToStartContainers, w.net != nil && !terminated, "", "")
	initMsg := ""
	if !initialized {
		initMsg = "containers with incomplete status: " + pendingInits(w.init)
	}
	setCond(corev1.PodInitialized, initialized, "ContainersNotInitialized", initMsg)
	containersReady := len(unready) == 0 && initialized && !terminated
	readyMsg := ""
	if len(unready) > 0 {
		readyMsg = fmt.Sprintf("containers with unready status: [%s]", strings.Join(unready, " "))
	}
	reason := "ContainersNotReady"
	if terminated {
		reason = "PodCompleted"
	}
	setCond(corev1.ContainersReady, containersReady, reason, readyMsg)
	ready, gateMsg := containersReady, ""
	for _, g := range pod.Spec.ReadinessGates {
		found := false
		for _, c := range pod.Status.Conditions {
			if c.Type == g.ConditionType && c.Status == corev1.ConditionTrue {
				found = true
			}
		}
		if !found {
			ready = false
			gateMsg = fmt.Sprintf("corresponding condition of pod readiness gate %q does not exist or is not true", g.ConditionType)
		}
	}
	readyReason := reason
	if containersReady && !ready {
		readyReason, readyMsg = "ReadinessGatesNotReady", gateMsg
	}
	setCond(corev1.PodReady, ready, readyReason, readyMsg)
	return st, ready
}

func pendingInits(init []*container) string {
	var names []string
	for _, c := range init {
		if !c.succeeded {
			names = append(names, c.name)
		}
	}
	return "[" + strings.Join(names, " ") + "]"
}

// phase is kubelet's getPhase for a pod whose init containers are done.
func phase(policy corev1.RestartPolicy, statuses []corev1.ContainerStatus) corev1.PodPhase {
	var running, waiting, stopped, succeeded int
	for _, cs := range statuses {
		switch {
		case cs.State.Running != nil:
			running++
		case cs.State.Terminated != nil:
			stopped++
			if cs.State.Terminated.ExitCode == 0 {
				succeeded++
			}
		case cs.State.Waiting != nil:
			if cs.LastTerminationState.Terminated != nil {
				stopped++
			} else {
				waiting++
			}
		}
	}
	switch {
	case waiting > 0:
		return corev1.PodPending
	case running > 0:
		return corev1.PodRunning
	case stopped > 0:
		switch policy {
		case corev1.RestartPolicyAlways:
			return corev1.PodRunning
		case corev1.RestartPolicyOnFailure:
			if stopped == succeeded {
				return corev1.PodSucceeded
			}
			return corev1.PodRunning
		default:
			if stopped == succeeded {
				return corev1.PodSucceeded
			}
			return corev1.PodFailed
		}
	}
	return corev1.PodPending
}
