package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/test/framework"
	"github.com/etcd-conductor/etcd-conductor/test/localcluster"
)

func memberPods(ctx context.Context, c client.Client, ns string) (map[string]corev1.Pod, error) {
	list := &corev1.PodList{}
	if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	out := map[string]corev1.Pod{}
	for _, p := range list.Items {
		out[p.Name] = p
	}
	return out, nil
}

func waitForPods(t *testing.T, c client.Client, ns string, n int) map[string]corev1.Pod {
	t.Helper()
	var pods map[string]corev1.Pod
	framework.Eventually(t, timeout, fmt.Sprintf("%d pods", n), func(ctx context.Context) (bool, string) {
		var err error
		if pods, err = memberPods(ctx, c, ns); err != nil {
			return false, err.Error()
		}
		return len(pods) == n, fmt.Sprintf("%d pods", len(pods))
	})
	return pods
}

func waitForStrategy(t *testing.T, c client.Client, ns, name string, want appsv1.StatefulSetUpdateStrategyType) {
	t.Helper()
	framework.Eventually(t, timeout, "update strategy "+string(want), func(ctx context.Context) (bool, string) {
		sts, err := getStatefulSet(ctx, c, ns, name)
		if err != nil {
			return false, err.Error()
		}
		return sts.Spec.UpdateStrategy.Type == want, string(sts.Spec.UpdateStrategy.Type)
	})
}

func uids(pods map[string]corev1.Pod) map[string]types.UID {
	out := map[string]types.UID{}
	for n, p := range pods {
		out[n] = p.UID
	}
	return out
}

// TestGateFlipSwitchesStrategyWithoutDeletingPods restarts the operator with the gate flipped, as
// a config change does, and checks the StatefulSet strategy follows while every pod stays.
func TestGateFlipSwitchesStrategyWithoutDeletingPods(t *testing.T) {
	env := localcluster.StartForTest(t, localcluster.Options{CRDs: true})
	const ns = "gateflip"
	ctx := setup(t, env, ns, "etcd-main")

	op := framework.StartOperator(t, env.RESTConfig(), framework.OperatorOptions{FeatureGates: gate(false)})
	if err := env.Client().Create(ctx, framework.NewEtcd(ns, "etcd-main", 3, framework.EtcdImage("3.6.8"))); err != nil {
		t.Fatal(err)
	}
	waitForStrategy(t, env.Client(), ns, "etcd-main", appsv1.RollingUpdateStatefulSetStrategyType)
	before := uids(waitForPods(t, env.Client(), ns, 3))

	for _, step := range []struct {
		on   bool
		want appsv1.StatefulSetUpdateStrategyType
	}{{true, appsv1.OnDeleteStatefulSetStrategyType}, {false, appsv1.RollingUpdateStatefulSetStrategyType}} {
		if err := op.Stop(); err != nil {
			t.Fatal(err)
		}
		op = framework.StartOperator(t, env.RESTConfig(), framework.OperatorOptions{FeatureGates: gate(step.on)})
		waitForStrategy(t, env.Client(), ns, "etcd-main", step.want)
		pods, err := memberPods(ctx, env.Client(), ns)
		if err != nil {
			t.Fatal(err)
		}
		for name, uid := range before {
			if pods[name].UID != uid || pods[name].DeletionTimestamp != nil {
				t.Fatalf("gate=%v: pod %s was deleted or replaced by the strategy switch", step.on, name)
			}
		}
	}
	framework.Eventually(t, timeout, "an UpdateStrategyChanged Event", func(ctx context.Context) (bool, string) {
		events := &corev1.EventList{}
		if err := env.Client().List(ctx, events, client.InNamespace(ns)); err != nil {
			return false, err.Error()
		}
		for _, e := range events.Items {
			if e.Reason == "UpdateStrategyChanged" {
				return true, ""
			}
		}
		return false, "none yet"
	})
}

// kubeletMarkReady writes the status a kubelet would write for a pod whose containers run and
// pass their readiness probes.
func kubeletMarkReady(ctx context.Context, c client.Client, pod *corev1.Pod) error {
	now := metav1.Now()
	pod.Status.Phase = corev1.PodRunning
	pod.Status.Conditions = []corev1.PodCondition{
		{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
	}
	pod.Status.ContainerStatuses = nil
	for _, ctr := range pod.Spec.Containers {
		pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: ctr.Name, Image: ctr.Image, Ready: true, Started: ptr.To(true),
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
		})
	}
	return c.Status().Update(ctx, pod)
}

// renewLease writes what a member-agent writes.
func renewLease(ctx context.Context, c client.Client, ns, name, role string, id int) error {
	lease := &coordinationv1.Lease{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, lease); err != nil {
		return err
	}
	lease.Spec.HolderIdentity = ptr.To(fmt.Sprintf("%x:c1a5:%s", 0x1000+id, role))
	lease.Spec.RenewTime = &metav1.MicroTime{Time: metav1.Now().Time}
	return c.Update(ctx, lease)
}

// TestOnDeleteRollsFollowersFirstAndWaitsForRejoin drives a rollout with the real StatefulSet
// controller recreating pods and the test playing kubelet and member-agents. The members have no
// address, so roles come from the leases (the controller's fallback). It checks the order
// (followers, then the leader), that nothing more is deleted while a recreated pod is not ready,
// and the status the user sees meanwhile.
func TestOnDeleteRollsFollowersFirstAndWaitsForRejoin(t *testing.T) {
	env := localcluster.StartForTest(t, localcluster.Options{CRDs: true})
	const ns = "rollout"
	ctx := setup(t, env, ns, "etcd-main")
	framework.StartOperator(t, env.RESTConfig(), framework.OperatorOptions{FeatureGates: gate(true)})

	etcd := framework.NewEtcd(ns, "etcd-main", 3, framework.EtcdImage("3.6.8"))
	if err := env.Client().Create(ctx, etcd); err != nil {
		t.Fatal(err)
	}
	waitForStrategy(t, env.Client(), ns, "etcd-main", appsv1.OnDeleteStatefulSetStrategyType)
	pods := waitForPods(t, env.Client(), ns, 3)
	roleOf := map[string]string{"etcd-main-0": "Member", "etcd-main-1": "Leader", "etcd-main-2": "Member"}
	for name := range pods {
		p := pods[name]
		if err := kubeletMarkReady(ctx, env.Client(), &p); err != nil {
			t.Fatal(err)
		}
	}
	renewAll := func(ctx context.Context) error {
		for i := 0; i < 3; i++ {
			name := fmt.Sprintf("etcd-main-%d", i)
			if err := renewLease(ctx, env.Client(), ns, name, roleOf[name], i); err != nil {
				return err
			}
		}
		return nil
	}
	if err := renewAll(ctx); err != nil {
		t.Fatal(err)
	}

	// The image bump.
	if err := framework.SetEtcdImage(ctx, env.Client(), etcd, framework.EtcdImage("3.7.3")); err != nil {
		t.Fatal(err)
	}

	var order []string
	original := uids(pods)
	for len(order) < 3 {
		// Wait for the controller to delete exactly one more original pod, which the
		// StatefulSet controller recreates at the new revision.
		var replaced string
		framework.Eventually(t, timeout, fmt.Sprintf("deletion #%d", len(order)+1), func(ctx context.Context) (bool, string) {
			now, err := memberPods(ctx, env.Client(), ns)
			if err != nil {
				return false, err.Error()
			}
			var gone []string
			for name, uid := range original {
				if p, ok := now[name]; !ok || p.UID != uid {
					gone = append(gone, name)
				}
			}
			if len(gone) > len(order)+1 {
				t.Fatalf("more than one pod replaced at once: %v (order so far %v)", gone, order)
			}
			for _, g := range gone {
				if !contains(order, g) {
					replaced = g
				}
			}
			return replaced != "", fmt.Sprintf("replaced so far: %v", gone)
		})
		order = append(order, replaced)

		// While the recreated pod is not ready, nothing else may go, and the status says why.
		newPod := waitForRecreated(t, env.Client(), ns, replaced, original[replaced])
		if len(order) < 3 {
			framework.Eventually(t, timeout, "status showing the wait", func(ctx context.Context) (bool, string) {
				got := &druidv1alpha1.Etcd{}
				if err := env.Client().Get(ctx, client.ObjectKeyFromObject(etcd), got); err != nil {
					return false, err.Error()
				}
				c := findCondition(got.Status.Conditions, druidv1alpha1.ConditionTypeAllMembersUpdated)
				if c == nil || c.Status != druidv1alpha1.ConditionFalse || !strings.Contains(c.Message, "wait/updated-not-participating") {
					return false, fmt.Sprintf("AllMembersUpdated = %+v", c)
				}
				if int(got.Status.CurrentReplicas) != len(order) {
					return false, fmt.Sprintf("currentReplicas = %d, want %d", got.Status.CurrentReplicas, len(order))
				}
				return true, ""
			})
			now, _ := memberPods(ctx, env.Client(), ns)
			for name, uid := range original {
				if !contains(order, name) && now[name].UID != uid {
					t.Fatalf("pod %s was deleted while the updated %s was not ready", name, replaced)
				}
			}
		}
		if err := kubeletMarkReady(ctx, env.Client(), newPod); err != nil {
			t.Fatal(err)
		}
		if err := renewAll(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if order[2] != "etcd-main-1" {
		t.Errorf("deletion order %v: the leader etcd-main-1 must go last", order)
	}
	framework.Eventually(t, timeout, "AllMembersUpdated", func(ctx context.Context) (bool, string) {
		got := &druidv1alpha1.Etcd{}
		if err := env.Client().Get(ctx, client.ObjectKeyFromObject(etcd), got); err != nil {
			return false, err.Error()
		}
		c := findCondition(got.Status.Conditions, druidv1alpha1.ConditionTypeAllMembersUpdated)
		return c != nil && c.Status == druidv1alpha1.ConditionTrue && got.Status.CurrentReplicas == 3,
			fmt.Sprintf("condition %+v, currentReplicas %d", c, got.Status.CurrentReplicas)
	})
	sts, err := getStatefulSet(ctx, env.Client(), ns, "etcd-main")
	if err != nil {
		t.Fatal(err)
	}
	// The reason our status computes updated-ness from the pods: the StatefulSet's own counter
	// does not move under OnDelete before Kubernetes 1.37.
	t.Logf("StatefulSet currentReplicas=%d currentRevision=%s updateRevision=%s; Etcd currentReplicas=3",
		sts.Status.CurrentReplicas, sts.Status.CurrentRevision, sts.Status.UpdateRevision)
}

func waitForRecreated(t *testing.T, c client.Client, ns, name string, oldUID types.UID) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{}
	framework.Eventually(t, timeout, "recreated "+name, func(ctx context.Context) (bool, string) {
		if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, pod); err != nil {
			return false, err.Error()
		}
		return pod.UID != oldUID, "old pod still there"
	})
	return pod
}

func findCondition(conds []druidv1alpha1.Condition, t druidv1alpha1.ConditionType) *druidv1alpha1.Condition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}

func contains(list []string, s string) bool {
	return slices.Contains(list, s)
}
