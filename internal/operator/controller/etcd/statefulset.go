package etcd

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
)

// runningStatefulSet reads the Etcd's member StatefulSet from the cache, for the planners that
// start from what runs (transport, version, trust): nil when there is none yet, or when the one of
// its name is not controlled by this Etcd (the sync reports that as a foreign object).
func (r *Reconciler) runningStatefulSet(ctx context.Context, etcd *druidv1alpha1.Etcd) (*appsv1.StatefulSet, error) {
	sts := &appsv1.StatefulSet{}
	err := r.client.Get(ctx, types.NamespacedName{Namespace: etcd.Namespace, Name: resources.StatefulSetName(etcd)}, sts)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading the member StatefulSet: %w", err)
	case !metav1.IsControlledBy(sts, etcd):
		return nil, nil
	}
	return sts, nil
}
