package etcd

import (
	"context"
	"fmt"
	"strings"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/resources"
)

// EventReasonPlaintextTraffic marks the Warning that an Etcd's members talk over plain HTTP.
const EventReasonPlaintextTraffic = "PlaintextTraffic"

// reportPlaintext warns, once per spec generation, that the members serve clients or each other
// without TLS: anyone on the pod network can read and write the data. The TLSEnabled condition
// (status controller) says it for as long as it lasts.
func (r *Reconciler) reportPlaintext(ctx context.Context, etcd *druidv1alpha1.Etcd) {
	if g := etcd.Status.ObservedGeneration; g != nil && *g == etcd.Generation {
		return
	}
	plain := resources.TransportOf(etcd).Plaintext()
	if len(plain) == 0 {
		return
	}
	msg := fmt.Sprintf("%s traffic of the members is unencrypted and unauthenticated (plain HTTP): set spec.etcd.clientUrlTls and spec.etcd.peerUrlTls when the Etcd is created to run them with TLS",
		strings.Join(plain, " and "))
	logr.FromContextOrDiscard(ctx).Info("Etcd runs without TLS", "plaintext", plain)
	r.recorder.Event(etcd, corev1.EventTypeWarning, EventReasonPlaintextTraffic, msg)
}

// checkTransportChange refuses TLS turned on or off for an Etcd whose StatefulSet already runs
// members with the other transport (resources.ValidateTransportChange).
func (r *Reconciler) checkTransportChange(ctx context.Context, etcd *druidv1alpha1.Etcd) []resources.Problem {
	sts := &appsv1.StatefulSet{}
	err := r.client.Get(ctx, types.NamespacedName{Namespace: etcd.Namespace, Name: resources.StatefulSetName(etcd)}, sts)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return []resources.Problem{{Code: resources.ErrTransportChange, Message: fmt.Sprintf("reading the StatefulSet to compare its transport: %v", err)}}
	case !metav1.IsControlledBy(sts, etcd):
		return nil // reported as a foreign object by the sync
	}
	running, ok := resources.RunningTransport(sts)
	if !ok {
		return nil
	}
	return resources.ValidateTransportChange(running, resources.TransportOf(etcd))
}
