package etcd

import (
	"context"
	"fmt"
	"strings"
	"time"

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

// transportMoveRecheck is how soon an Etcd moving to TLS is looked at again while a stage rolls
// out: the StatefulSet's status changes wake the reconciler too, this only bounds a missed one.
const transportMoveRecheck = 5 * time.Second

// planTransport decides the client and peer stages to render (internal/decide/transport) from the
// running StatefulSet and whether every member runs its template.
func (r *Reconciler) planTransport(ctx context.Context, etcd *druidv1alpha1.Etcd) (transport.Decision, error) {
	in := transport.Observed{Desired: resources.TransportOf(etcd)}
	sts, err := r.runningStatefulSet(ctx, etcd)
	if err != nil || sts == nil {
		return transport.Plan(in), err
	}
	if running, ok := resources.RunningTransport(sts); ok {
		in.Running = &running
	}
	if in.Running != nil && *in.Running != in.Desired {
		if in.RolledOut, err = r.rolledOut(ctx, etcd, sts); err != nil {
			return transport.Decision{}, err
		}
	}
	return transport.Plan(in), nil
}

// rolledOut tells whether every member pod runs the StatefulSet's current template and is ready:
// then every member holds what that template renders.
func (r *Reconciler) rolledOut(ctx context.Context, etcd *druidv1alpha1.Etcd, sts *appsv1.StatefulSet) (bool, error) {
	if sts.Status.ObservedGeneration < sts.Generation || sts.Status.UpdateRevision == "" || sts.Spec.Replicas == nil {
		return false, nil
	}
	pods := &corev1.PodList{}
	if err := r.client.List(ctx, pods, client.InNamespace(etcd.Namespace), client.MatchingLabels(resources.SelectorLabels(etcd))); err != nil {
		return false, fmt.Errorf("listing the member pods: %w", err)
	}
	revisions := make([]operation.Pod, 0, len(pods.Items))
	for i := range pods.Items {
		p := &pods.Items[i]
		if !etcdstatus.PodReady(p) {
			return false, nil
		}
		revisions = append(revisions, operation.Pod{Revision: p.Labels[appsv1.StatefulSetRevisionLabel], Terminating: !p.DeletionTimestamp.IsZero()})
	}
	if operation.RolloutInFlight(sts.Status.UpdateRevision, revisions) {
		return false, nil
	}
	return len(revisions) == int(*sts.Spec.Replicas), nil
}

// reportTransportMove records each step of a move to TLS once, when its template is written.
func (r *Reconciler) reportTransportMove(ctx context.Context, etcd *druidv1alpha1.Etcd, d transport.Decision) {
	switch d.Rule {
	case transport.RuleAdd, transport.RuleSwitch, transport.RuleCalledOff:
		logr.FromContextOrDiscard(ctx).Info("Moving the members' traffic", "rule", d.Rule, "reason", d.Reason)
		r.recorder.Event(etcd, corev1.EventTypeNormal, d.Rule.CamelCase(), d.Reason)
	}
}
