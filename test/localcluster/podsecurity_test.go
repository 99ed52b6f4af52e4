package localcluster_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
	"github.com/etcd-conductor/etcd-conductor/test/framework"
	"github.com/etcd-conductor/etcd-conductor/test/localcluster"
)

// The e2e namespaces rely on the control plane's own PodSecurity admission: it must be enabled
// (it is by default) and reject what the restricted level forbids, while admitting member pods.
func TestPodSecurityAdmissionEnforcesRestricted(t *testing.T) {
	c := localcluster.StartForTest(t, localcluster.Options{})
	cs, err := kubernetes.NewForConfig(c.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	cl, err := client.New(c.RESTConfig(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), eventually)
	defer cancel()
	const ns = "restricted"
	if _, err := framework.CreateNamespace(ctx, cl, ns, framework.RestrictedPodSecurity()); err != nil {
		t.Fatal(err)
	}
	etcd := framework.NewEtcd(ns, "etcd", 3, framework.EtcdImage("3.6.8"))
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, resources.ServiceAccount(etcd), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sts, err := resources.StatefulSet(etcd, resources.Settings{MemberAgentImage: framework.MemberAgentImage})
	if err != nil {
		t.Fatal(err)
	}
	member := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "etcd-0", Namespace: ns}, Spec: sts.Spec.Template.Spec}
	member.Spec.Volumes = append(member.Spec.Volumes, corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	loose := member.DeepCopy()
	loose.Name = "etcd-loose"
	loose.Spec.SecurityContext = nil
	loose.Spec.Containers[0].SecurityContext = nil

	// Pods are admitted only once the ServiceAccount admission sees the namespace's default
	// ServiceAccount; until then every create fails for that reason, not for pod security.
	deadline := time.Now().Add(eventually)
	for {
		_, err = cs.CoreV1().Pods(ns).Create(ctx, loose, metav1.CreateOptions{})
		if err == nil || strings.Contains(err.Error(), "PodSecurity") || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `violates PodSecurity "restricted:latest"`) {
		t.Fatalf("a member pod without security contexts: err = %v, want rejected by PodSecurity restricted", err)
	}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, member, metav1.CreateOptions{}); err != nil {
		t.Errorf("the member pod template is not admitted under restricted: %v", err)
	}
}
