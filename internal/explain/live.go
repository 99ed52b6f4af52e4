package explain

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// ReadLive reads the StatefulSet named name (the Etcd's name), the pods its selector matches and
// the namespace's Leases from a cluster, giving ExplainState the same input a saved state would.
func ReadLive(ctx context.Context, c kubernetes.Interface, namespace, name string) (State, error) {
	sts, err := c.AppsV1().StatefulSets(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return State{}, fmt.Errorf("reading StatefulSet %s/%s: %w", namespace, name, err)
	}
	selector := ""
	if sts.Spec.Selector != nil {
		s, err := metav1.LabelSelectorAsSelector(sts.Spec.Selector)
		if err != nil {
			return State{}, fmt.Errorf("StatefulSet %s/%s has an invalid selector: %w", namespace, name, err)
		}
		selector = s.String()
	}
	pods, err := c.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return State{}, fmt.Errorf("listing pods of %s/%s: %w", namespace, name, err)
	}
	leases, err := c.CoordinationV1().Leases(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return State{}, fmt.Errorf("listing Leases in %s: %w", namespace, err)
	}
	return State{StatefulSet: sts, Pods: pods.Items, Leases: leases.Items}, nil
}
