package nodesim

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// The simulator also plays the two halves of a volume expansion for the volumes it provisioned,
// as the CSI external-resizer and kubelet do for a driver that needs a node-side expansion:
//
//   - the resizer: a bound claim asks for more than its status.capacity and its StorageClass allows
//     expansion; the PersistentVolume's spec.capacity is raised, and the claim records the
//     controller side done: status.allocatedResources at the new size,
//     allocatedResourceStatuses NodeResizePending, condition FileSystemResizePending;
//   - kubelet: for such a claim that a pod on this node mounts (at once, or when a pod starts on
//     it), the filesystem is grown: status.capacity reaches the size, the condition and the
//     allocated resource status go.
//
// A hostPath directory has no size, so the growth is the bookkeeping alone, as a real filesystem
// growth is to the data on it: the data stays. The apiserver's PersistentVolumeClaimResize
// admission refuses a larger request in a class that does not allow expansion, so the class check
// here only mirrors a resizer that leaves such claims alone.

// resizeWanted: a bound claim asking for more than it holds.
func resizeWanted(pvc *corev1.PersistentVolumeClaim) bool {
	if pvc.Status.Phase != corev1.ClaimBound || pvc.Spec.VolumeName == "" || pvc.DeletionTimestamp != nil {
		return false
	}
	want, ok := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	have := pvc.Status.Capacity[corev1.ResourceStorage]
	return ok && want.Cmp(have) > 0
}

// claimUpdated starts a resize of pvc when it asks for one. Each status write is another update
// event, so a write lost to a conflict is tried again on the next one.
func (s *Simulator) claimUpdated(pvc *corev1.PersistentVolumeClaim) {
	if !resizeWanted(pvc) {
		return
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := s.resize(pvc.Namespace, pvc.Name); err != nil && !apierrors.IsConflict(err) && s.ctx.Err() == nil {
			s.log.Error(err, "resizing volume", "claim", pvc.Namespace+"/"+pvc.Name)
		}
	}()
}

// resize carries out both halves for the claim namespace/name as it is now.
func (s *Simulator) resize(namespace, name string) error {
	ctx, cancel := context.WithTimeout(s.ctx, 15*time.Second)
	defer cancel()
	claims := s.client.CoreV1().PersistentVolumeClaims(namespace)
	pvc, err := claims.Get(ctx, name, metav1.GetOptions{})
	if err != nil || !resizeWanted(pvc) {
		return client404(err)
	}
	pvs := s.client.CoreV1().PersistentVolumes()
	pv, err := pvs.Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
	if err != nil || pv.Annotations[provisionedByAnnotation] != provisionerName || !onNode(pv, s.o.NodeName) {
		// Not a volume this node provisioned: another resizer's.
		return client404(err)
	}
	if pvc.Spec.StorageClassName == nil || *pvc.Spec.StorageClassName == "" {
		return nil
	}
	class, err := s.client.StorageV1().StorageClasses().Get(ctx, *pvc.Spec.StorageClassName, metav1.GetOptions{})
	if err != nil || class.AllowVolumeExpansion == nil || !*class.AllowVolumeExpansion {
		return client404(err)
	}
	want := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	// The resizer: the volume first, then the claim's record of it.
	if have := pv.Spec.Capacity[corev1.ResourceStorage]; have.Cmp(want) < 0 {
		pv.Spec.Capacity[corev1.ResourceStorage] = want
		if _, err := pvs.Update(ctx, pv, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	if allocated := pvc.Status.AllocatedResources[corev1.ResourceStorage]; allocated.Cmp(want) != 0 ||
		pvc.Status.AllocatedResourceStatuses[corev1.ResourceStorage] != corev1.PersistentVolumeClaimNodeResizePending {
		if pvc.Status.AllocatedResources == nil {
			pvc.Status.AllocatedResources = corev1.ResourceList{}
		}
		pvc.Status.AllocatedResources[corev1.ResourceStorage] = want
		pvc.Status.AllocatedResourceStatuses = map[corev1.ResourceName]corev1.ClaimResourceStatus{
			corev1.ResourceStorage: corev1.PersistentVolumeClaimNodeResizePending}
		pvc.Status.Conditions = setClaimCondition(pvc.Status.Conditions, corev1.PersistentVolumeClaimCondition{
			Type: corev1.PersistentVolumeClaimFileSystemResizePending, Status: corev1.ConditionTrue,
			Message: "Waiting for user to (re-)start a pod to finish file system resize of volume on node.",
		})
		if pvc, err = claims.UpdateStatus(ctx, pvc, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	if !s.mounted(pvc) {
		return nil
	}
	return s.expandOnNode(ctx, pvc)
}

// expandOnNode is kubelet's half: the filesystem of a volume whose controller side is done grows
// while a pod mounts it.
func (s *Simulator) expandOnNode(ctx context.Context, pvc *corev1.PersistentVolumeClaim) error {
	if pvc.Status.AllocatedResourceStatuses[corev1.ResourceStorage] != corev1.PersistentVolumeClaimNodeResizePending {
		return nil
	}
	if pvc.Status.Capacity == nil {
		pvc.Status.Capacity = corev1.ResourceList{}
	}
	pvc.Status.Capacity[corev1.ResourceStorage] = pvc.Status.AllocatedResources[corev1.ResourceStorage]
	pvc.Status.AllocatedResourceStatuses = nil
	var conds []corev1.PersistentVolumeClaimCondition
	for _, c := range pvc.Status.Conditions {
		if c.Type != corev1.PersistentVolumeClaimFileSystemResizePending && c.Type != corev1.PersistentVolumeClaimResizing {
			conds = append(conds, c)
		}
	}
	pvc.Status.Conditions = conds
	_, err := s.client.CoreV1().PersistentVolumeClaims(pvc.Namespace).UpdateStatus(ctx, pvc, metav1.UpdateOptions{})
	return err
}

// mounted tells whether a pod on this node mounts pvc.
func (s *Simulator) mounted(pvc *corev1.PersistentVolumeClaim) bool {
	pods, err := s.pods.Pods(pvc.Namespace).List(labels.Everything())
	if err != nil {
		return false
	}
	for _, p := range pods {
		if p.Spec.NodeName != s.o.NodeName || p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		for _, v := range p.Spec.Volumes {
			if v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == pvc.Name {
				return true
			}
		}
	}
	return false
}

func onNode(pv *corev1.PersistentVolume, node string) bool {
	if pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil {
		return false
	}
	for _, term := range pv.Spec.NodeAffinity.Required.NodeSelectorTerms {
		for _, e := range term.MatchExpressions {
			for _, v := range e.Values {
				if e.Key == "kubernetes.io/hostname" && v == node {
					return true
				}
			}
		}
	}
	return false
}

func setClaimCondition(conds []corev1.PersistentVolumeClaimCondition, c corev1.PersistentVolumeClaimCondition) []corev1.PersistentVolumeClaimCondition {
	now := metav1.Now()
	c.LastProbeTime, c.LastTransitionTime = now, now
	for i := range conds {
		if conds[i].Type == c.Type {
			if conds[i].Status == c.Status {
				c.LastTransitionTime = conds[i].LastTransitionTime
			}
			conds[i] = c
			return conds
		}
	}
	return append(conds, c)
}

// client404 drops a NotFound: the object went, nothing to resize.
func client404(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
