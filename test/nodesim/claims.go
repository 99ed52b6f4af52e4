package nodesim

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// A PersistentVolumeClaim's data lives in <DataDir>/<ns>/<claim>-<claim UID>:
// it survives pod deletion and recreation (the claim stays), but a claim
// that is deleted and created again starts empty, as a freshly provisioned
// volume would. The simulator also plays the provisioner and the PV binder
// for claims its pods use: it creates a hostPath PersistentVolume
// "pvc-<claim UID>" (reclaim policy Delete, node affinity to our Node) and
// binds both sides, so claims show Bound. When such a claim is deleted, its
// data directory and PersistentVolume go too.

const provisionedByAnnotation = "pv.kubernetes.io/provisioned-by"
const provisionerName = "nodesim.etcd-conductor/hostpath"

func (s *Simulator) claimDir(namespace, name string, uid types.UID) string {
	return filepath.Join(s.o.DataDir, namespace, name+"-"+string(uid))
}

// ClaimDir is the host directory holding a claim's data ("namespace/claim"),
// e.g. for a test to inspect or destroy a member's data.
func (s *Simulator) ClaimDir(ctx context.Context, claim string) (string, error) {
	ns, name, ok := splitKey(claim)
	if !ok {
		return "", fmt.Errorf("claim %q: want namespace/name", claim)
	}
	pvc, err := s.client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("reading claim %s: %w", claim, err)
	}
	return s.claimDir(ns, name, pvc.UID), nil
}

// claimVolume makes a pod wait for its claim to exist, as kubelet's volume
// manager does, binds it if needed and returns its data directory.
func (s *Simulator) claimVolume(namespace, name string) (string, error) {
	ctx, cancel := context.WithTimeout(s.ctx, 15*time.Second)
	defer cancel()
	pvc, err := s.client.CoreV1().PersistentVolumeClaims(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("persistentvolumeclaim %q: %w", name, err)
	}
	if pvc.DeletionTimestamp != nil {
		return "", fmt.Errorf("persistentvolumeclaim %q is being deleted", name)
	}
	dir := s.claimDir(namespace, name, pvc.UID)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return "", fmt.Errorf("creating volume for claim %q: %w", name, err)
	}
	if pvc.Spec.VolumeName == "" || pvc.Status.Phase != corev1.ClaimBound {
		if err := s.bindClaim(ctx, pvc, dir); err != nil {
			return "", fmt.Errorf("binding claim %q: %w", name, err)
		}
	}
	// A resize whose node side waited for a pod to mount the volume finishes now (resize.go).
	if err := s.expandOnNode(ctx, pvc); err != nil {
		s.log.Error(err, "finishing the file system resize", "claim", namespace+"/"+name)
	}
	return dir, nil
}

func (s *Simulator) bindClaim(ctx context.Context, pvc *corev1.PersistentVolumeClaim, dir string) error {
	pvName := pvc.Spec.VolumeName
	if pvName == "" {
		pvName = "pvc-" + string(pvc.UID)
	}
	size, ok := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	if !ok {
		size = resource.MustParse("1Gi")
	}
	class := ""
	if pvc.Spec.StorageClassName != nil {
		class = *pvc.Spec.StorageClassName
	}
	pvs := s.client.CoreV1().PersistentVolumes()
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: pvName, Annotations: map[string]string{provisionedByAnnotation: provisionerName}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: size},
			AccessModes:                   pvc.Spec.AccessModes,
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
			StorageClassName:              class,
			VolumeMode:                    pvc.Spec.VolumeMode,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: dir}},
			ClaimRef: &corev1.ObjectReference{
				Kind: "PersistentVolumeClaim", APIVersion: "v1",
				Namespace: pvc.Namespace, Name: pvc.Name, UID: pvc.UID,
			},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: []string{s.o.NodeName}}},
			}}}},
		},
	}
	created, err := pvs.Create(ctx, pv, metav1.CreateOptions{})
	switch {
	case apierrors.IsAlreadyExists(err):
		if created, err = pvs.Get(ctx, pvName, metav1.GetOptions{}); err != nil {
			return err
		}
	case err != nil:
		return err
	}
	if created.Status.Phase != corev1.VolumeBound {
		created.Status.Phase = corev1.VolumeBound
		if _, err := pvs.UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	claims := s.client.CoreV1().PersistentVolumeClaims(pvc.Namespace)
	if pvc.Spec.VolumeName == "" {
		pvc.Spec.VolumeName = pvName
		if pvc.Annotations == nil {
			pvc.Annotations = map[string]string{}
		}
		pvc.Annotations["pv.kubernetes.io/bind-completed"] = "yes"
		pvc.Annotations["pv.kubernetes.io/bound-by-controller"] = "yes"
		if pvc, err = claims.Update(ctx, pvc, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	pvc.Status.Phase = corev1.ClaimBound
	pvc.Status.AccessModes = pvc.Spec.AccessModes
	pvc.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: size}
	_, err = claims.UpdateStatus(ctx, pvc, metav1.UpdateOptions{})
	return err
}

// claimDeleted reclaims a deleted claim's volume (policy Delete): its data
// directory and, if we provisioned it, its PersistentVolume.
func (s *Simulator) claimDeleted(pvc *corev1.PersistentVolumeClaim) {
	dir := s.claimDir(pvc.Namespace, pvc.Name, pvc.UID)
	if err := os.RemoveAll(dir); err != nil {
		s.log.Error(err, "removing claim data", "claim", pvc.Namespace+"/"+pvc.Name)
	}
	pvName := "pvc-" + string(pvc.UID)
	if pvc.Spec.VolumeName != "" && pvc.Spec.VolumeName != pvName {
		return
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		ctx, cancel := context.WithTimeout(s.ctx, 15*time.Second)
		defer cancel()
		pv, err := s.client.CoreV1().PersistentVolumes().Get(ctx, pvName, metav1.GetOptions{})
		if err != nil || pv.Annotations[provisionedByAnnotation] != provisionerName {
			return
		}
		err = s.client.CoreV1().PersistentVolumes().Delete(ctx, pvName, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &pv.UID}})
		if err != nil && !apierrors.IsNotFound(err) && s.ctx.Err() == nil {
			s.log.Error(err, "deleting persistent volume", "pv", pvName)
		}
	}()
}

func splitKey(key string) (namespace, name string, ok bool) {
	for i := 0; i < len(key); i++ {
		if key[i] == '/' {
			return key[:i], key[i+1:], i > 0 && i < len(key)-1
		}
	}
	return "", "", false
}
