package nodesim

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
)

// startEvents records pod events with kubelet's source and reasons (Pulled,
// Created, Started, Killing, BackOff, Unhealthy, Failed, FailedMount), so
// `kubectl describe pod` tells the same story it would on a real node.
func (s *Simulator) startEvents() {
	s.broadcaster = record.NewBroadcaster()
	s.broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: s.client.CoreV1().Events("")})
	s.recorder = s.broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "kubelet", Host: s.o.NodeName})
}

func (w *podWorker) event(eventType, reason, format string, args ...any) {
	if w.s.recorder == nil {
		return
	}
	w.s.recorder.Eventf(w.currentPod(), eventType, reason, format, args...)
}
