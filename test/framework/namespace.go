package framework

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// testNamespaceLabels go on every namespace a test creates, so that namespace-wide policy (Pod
// Security admission and the like) is decided here, once, for every test.
var testNamespaceLabels = map[string]string{}

// RestrictedPodSecurity labels a namespace so that the apiserver's own PodSecurity admission holds
// its pods to the restricted Pod Security Standard: a member pod template that loosens its security
// context is rejected there, and the StatefulSet never gets its pods.
func RestrictedPodSecurity() map[string]string {
	labels := map[string]string{}
	for _, mode := range []string{"enforce", "warn", "audit"} {
		labels["pod-security.kubernetes.io/"+mode] = "restricted"
		labels["pod-security.kubernetes.io/"+mode+"-version"] = "latest"
	}
	return labels
}

// CreateNamespace creates the namespace a test works in and returns its name. A name ending in
// "-" is a prefix: the API server appends a random suffix, so a scenario can run many times in
// one cluster. labels are added to testNamespaceLabels. Every test namespace is created here.
func CreateNamespace(ctx context.Context, c client.Client, name string, labels map[string]string) (string, error) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Labels: maps.Clone(testNamespaceLabels)}}
	if ns.Labels == nil {
		ns.Labels = map[string]string{}
	}
	maps.Copy(ns.Labels, labels)
	if strings.HasSuffix(name, "-") {
		ns.GenerateName = name
	} else {
		ns.Name = name
	}
	if err := c.Create(ctx, ns); err != nil {
		return "", fmt.Errorf("creating namespace %s: %w", name, err)
	}
	return ns.Name, nil
}

// DeleteNamespace deletes a namespace and waits until the namespace controller has removed it
// and everything in it (pods are finished by the kubelet, claims released), up to timeout.
func DeleteNamespace(ctx context.Context, c client.Client, name string, timeout time.Duration) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := c.Delete(ctx, ns); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting namespace %s: %w", name, err)
	}
	var phase string
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKeyFromObject(ns), ns)
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if err == nil {
			phase = describeNamespaceDeletion(ns)
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("namespace %s not gone after %s (%s): %w", name, timeout, phase, err)
	}
	return nil
}

// describeNamespaceDeletion names what the namespace controller is still waiting for.
func describeNamespaceDeletion(ns *corev1.Namespace) string {
	parts := []string{string(ns.Status.Phase)}
	for _, c := range ns.Status.Conditions {
		if c.Status == corev1.ConditionTrue {
			parts = append(parts, c.Message)
		}
	}
	return strings.Join(parts, "; ")
}
