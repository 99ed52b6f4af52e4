package etcd

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/render"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/memberaccess"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
)

// observation is one look at an Etcd: what internal/decide/render decides on, and what the acts
// need of what was read (the StatefulSet, the member TLS Secret, the members' connections).
type observation struct {
	render.Observed
	// sts is the Etcd's own StatefulSet (nil: none, or one of its name it does not control);
	// stsExists tells whether one of its name exists at all.
	sts       *appsv1.StatefulSet
	stsExists bool
	// members reaches the members, when they were asked this pass (nil otherwise); status is
	// their answers, membersErr why none came.
	members    *memberaccess.Cluster
	status     *memberaccess.ClusterStatus
	membersErr error
	// quota is the check of a lowered spec.etcd.quota: nil when it is not lowered.
	quota *quotaLowering
	// trust is what the TLS material was read from (trust.go).
	trust trustObservation
}

// observe reads, once, everything the decision needs. The members are asked at most once, and
// only when a part needs their word: a version change between minors or a downgrade recorded, a
// volume change that can be made once it is known who leads, a lowered quota. What they do not
// need is never asked: an Etcd whose pods do not run costs no dial on a settled pass.
func (r *Reconciler) observe(ctx context.Context, etcd *druidv1alpha1.Etcd) (*observation, error) {
	o := &observation{Observed: render.Observed{Conditions: etcd.Status.Conditions}}
	if err := r.observeStatefulSet(ctx, etcd, o); err != nil {
		return nil, err
	}
	var err error
	if o.Transport, err = r.observeTransport(ctx, etcd, o.sts); err != nil {
		return nil, err
	}
	// The member pods as the apiserver holds them now, read once for the parts that need their
	// spec (the cache keeps none): the strategy hand-over and a version change's failed starts.
	var pods []corev1.Pod
	var podsRead bool
	memberPods := func() ([]corev1.Pod, error) {
		if !podsRead && o.sts != nil {
			if pods, err = memberaccess.ReadMemberPods(ctx, r.apiReader, o.sts); err != nil {
				return nil, err
			}
			podsRead = true
		}
		return pods, nil
	}
	if o.Strategy, err = r.observeStrategy(etcd, o.sts, memberPods); err != nil {
		return nil, err
	}
	var versionNeedsMembers bool
	o.Version, versionNeedsMembers = ObserveVersion(etcd, o.sts)
	if o.Volume, err = r.observeVolumes(ctx, etcd, o.sts); err != nil {
		return nil, err
	}
	o.quota = r.observeQuota(ctx, etcd)
	if versionNeedsMembers || render.VolumeNeedsLeader(o.Volume) || o.quota != nil {
		r.askMembers(ctx, etcd, o)
	}
	if versionNeedsMembers && r.pool != nil {
		// Planned without the members' word when none answered: a downgrade then waits.
		cs := memberaccess.ClusterStatus{}
		if o.status != nil {
			cs = *o.status
		}
		p, err := memberPods()
		if err != nil {
			return nil, fmt.Errorf("reading the member pods for failed starts: %w", err)
		}
		o.Version = ObserveVersionMembers(o.Version, cs, p, time.Now(), r.startGrace)
	}
	if o.status != nil {
		if leader, ok := o.status.Leader(); ok {
			// The pool names members by their pods.
			if ordinal, ok := resources.OrdinalOf(etcd, leader.Name); ok {
				o.Volume.LeaderOrdinal = ordinal
			}
		}
	}
	o.Trust, o.trust = r.observeTrust(ctx, etcd, o.sts)
	return o, nil
}

// observeStatefulSet reads the Etcd's StatefulSet from the cache, once a pass: every part of the
// decision starts from it.
func (r *Reconciler) observeStatefulSet(ctx context.Context, etcd *druidv1alpha1.Etcd, o *observation) error {
	sts := &appsv1.StatefulSet{}
	err := r.client.Get(ctx, types.NamespacedName{Namespace: etcd.Namespace, Name: resources.StatefulSetName(etcd)}, sts)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("reading the member StatefulSet: %w", err)
	}
	o.stsExists = true
	// One of its name it does not control is the sync's to report as a foreign object; the
	// planners start from nothing running.
	if metav1.IsControlledBy(sts, etcd) {
		o.sts = sts
	}
	return nil
}

// askMembers asks the members for their status, once; a failure is kept (the parts that need
// their word wait) and logged.
func (r *Reconciler) askMembers(ctx context.Context, etcd *druidv1alpha1.Etcd, o *observation) {
	if r.pool == nil {
		o.membersErr = fmt.Errorf("the reconciler has no member client")
		return
	}
	cluster, err := r.access.Reach(ctx, r.pool, etcd)
	if err == nil {
		o.members = cluster
		var cs memberaccess.ClusterStatus
		cs, err = cluster.Statuses(ctx)
		if len(cs.Members) > 0 {
			o.status = &cs
		}
	}
	if err != nil {
		o.membersErr = err
		logr.FromContextOrDiscard(ctx).Info("Cannot ask the members; what needs their word waits", "error", err.Error())
	}
}
