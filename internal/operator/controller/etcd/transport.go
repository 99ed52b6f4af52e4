package etcd

import (
	"context"
	"fmt"
	"strings"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/operation"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/transport"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/etcdstatus"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
)

// EventReasonPlaintextTraffic marks the Warning that an Etcd's members talk over plain HTTP.
const EventReasonPlaintextTraffic = "PlaintextTraffic"

// reportPlaintext warns, once per spec generation, that the spec leaves client or peer traffic
// on plain HTTP: anyone on the pod network can read and write the data. The TLSEnabled condition
// (status controller) says what runs for as long as it lasts.
func (r *Reconciler) reportPlaintext(ctx context.Context, etcd *druidv1alpha1.Etcd) {
	if generationReported(etcd) {
		return
	}
	plain := resources.PlaintextKinds(resources.TransportOf(etcd))
	if len(plain) == 0 {
		return
	}
	msg := fmt.Sprintf("%s traffic of the members is unencrypted and unauthenticated (plain HTTP): set spec.etcd.clientUrlTls and spec.etcd.peerUrlTls to move it to TLS",
		strings.Join(plain, " and "))
	logr.FromContextOrDiscard(ctx).Info("Etcd runs without TLS", "plaintext", plain)
	r.recorder.Event(etcd, corev1.EventTypeWarning, EventReasonPlaintextTraffic, msg)
}

// observeTransport is what internal/decide/transport decides on (ObserveTransport), the member
// pods listed from the cache only while the running stages are not the spec's.
func (r *Reconciler) observeTransport(ctx context.Context, etcd *druidv1alpha1.Etcd, sts *appsv1.StatefulSet) (transport.Observed, error) {
	in, needsPods := ObserveTransport(etcd, sts)
	if !needsPods {
		return in, nil
	}
	pods := &corev1.PodList{}
	if err := r.client.List(ctx, pods, client.InNamespace(etcd.Namespace), client.MatchingLabels(resources.SelectorLabels(etcd))); err != nil {
		return transport.Observed{}, fmt.Errorf("listing the member pods: %w", err)
	}
	in.RolledOut = RolledOut(sts, pods.Items)
	return in, nil
}

// ObserveTransport is what internal/decide/transport decides on from the Etcd and its StatefulSet
// (nil: none yet): the spec's stages and those the running template renders; and whether the
// member pods are needed too, to tell whether every member runs that template (RolledOut): only
// while the two differ. The plan command observes the same way.
func ObserveTransport(etcd *druidv1alpha1.Etcd, sts *appsv1.StatefulSet) (transport.Observed, bool) {
	in := transport.Observed{Desired: resources.TransportOf(etcd)}
	if sts == nil {
		return in, false
	}
	if running, ok := resources.RunningTransport(sts); ok {
		in.Running = &running
	}
	return in, in.Running != nil && *in.Running != in.Desired
}

// RolledOut tells whether every member pod runs the StatefulSet's current template and is ready:
// then every member holds what that template renders.
func RolledOut(sts *appsv1.StatefulSet, pods []corev1.Pod) bool {
	if sts.Status.ObservedGeneration < sts.Generation || sts.Status.UpdateRevision == "" || sts.Spec.Replicas == nil {
		return false
	}
	revisions := make([]operation.Pod, 0, len(pods))
	for i := range pods {
		p := &pods[i]
		if !etcdstatus.PodReady(p) {
			return false
		}
		revisions = append(revisions, operation.Pod{Revision: p.Labels[appsv1.StatefulSetRevisionLabel], Terminating: !p.DeletionTimestamp.IsZero()})
	}
	if operation.RolloutInFlight(sts.Status.UpdateRevision, revisions) {
		return false
	}
	return len(revisions) == int(*sts.Spec.Replicas)
}

// reportTransportMove records each step of a move to TLS once, when its template is written.
func (r *Reconciler) reportTransportMove(ctx context.Context, etcd *druidv1alpha1.Etcd, d transport.Decision) {
	switch d.Rule {
	case transport.RuleAdd, transport.RuleSwitch, transport.RuleCalledOff:
		logr.FromContextOrDiscard(ctx).Info("Moving the members' traffic", "rule", d.Rule, "reason", d.Reason)
		r.recorder.Event(etcd, corev1.EventTypeNormal, d.Rule.CamelCase(), d.Reason)
	}
}
