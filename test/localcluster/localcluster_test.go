package localcluster_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/etcd-conductor/etcd-conductor/test/localcluster"
	"github.com/etcd-conductor/etcd-conductor/test/localcluster/proc"
)

// eventually bounds waits for the real controllers; it is a liveness bound,
// not a performance assertion, and generous for a loaded 2-core machine.
const eventually = 2 * time.Minute

func TestStatefulSetOnDeleteWithRealController(t *testing.T) {
	localcluster.SkipWithoutBinaries(t, "")
	var log strings.Builder
	c, err := localcluster.Start(context.Background(), localcluster.Options{WorkDir: t.TempDir(), Log: &log})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	pids := c.PIDs()
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = c.Stop()
		}
	})
	for _, name := range []string{"etcd", "kube-apiserver", "kube-controller-manager"} {
		if !proc.Running(pids[name]) {
			t.Fatalf("%s (pid %d) is not running after Start", name, pids[name])
		}
	}

	cs, err := kubernetes.NewForConfig(c.RESTConfig())
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	sts := onDeleteStatefulSet("etcd-test", 3)
	if _, err := cs.AppsV1().StatefulSets("default").Create(ctx, sts, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create StatefulSet: %v", err)
	}

	var firstRevision string
	waitUntil(t, ctx, "3 pods with controller-revision-hash", func(ctx context.Context) (bool, error) {
		pods, err := stsPods(ctx, cs, sts)
		if err != nil || len(pods) != 3 {
			return false, err
		}
		for _, p := range pods {
			if p.Labels[appsv1.ControllerRevisionHashLabelKey] == "" {
				return false, nil
			}
		}
		got, err := cs.AppsV1().StatefulSets("default").Get(ctx, sts.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		firstRevision = got.Status.UpdateRevision
		return firstRevision != "", nil
	})
	podsBefore, err := stsPods(ctx, cs, sts)
	if err != nil {
		t.Fatalf("list pods: %v", err)
	}

	// A template change under OnDelete moves updateRevision and leaves pods alone.
	got, err := cs.AppsV1().StatefulSets("default").Get(ctx, sts.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get StatefulSet: %v", err)
	}
	got.Spec.Template.Annotations = map[string]string{"test/template-change": "1"}
	if _, err := cs.AppsV1().StatefulSets("default").Update(ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update StatefulSet template: %v", err)
	}
	waitUntil(t, ctx, "status.updateRevision to move", func(ctx context.Context) (bool, error) {
		s, err := cs.AppsV1().StatefulSets("default").Get(ctx, sts.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return s.Status.ObservedGeneration >= s.Generation && s.Status.UpdateRevision != firstRevision, nil
	})
	podsAfter, err := stsPods(ctx, cs, sts)
	if err != nil {
		t.Fatalf("list pods: %v", err)
	}
	if diff := podIdentities(podsBefore, podsAfter); diff != "" {
		t.Errorf("OnDelete StatefulSet touched pods on a template change: %s", diff)
	}

	if err := c.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	stopped = true
	for name, pid := range pids {
		if proc.Running(pid) {
			t.Errorf("%s (pid %d) survived Stop", name, pid)
		}
	}
	if _, err := os.Stat(c.WorkDir()); !os.IsNotExist(err) {
		t.Errorf("work dir %s not removed by Stop (stat: %v)", c.WorkDir(), err)
	}
	if !strings.Contains(log.String(), "stopped kube-apiserver") {
		t.Errorf("summary log lacks the apiserver stop line:\n%s", log.String())
	}
}

func TestRestartControllerManagerChangesPID(t *testing.T) {
	c := localcluster.StartForTest(t, localcluster.Options{FeatureGates: "MaxUnavailableStatefulSet=true"})
	before := c.PIDs()["kube-controller-manager"]
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := c.RestartControllerManager(ctx, "MaxUnavailableStatefulSet=false"); err != nil {
		t.Fatalf("RestartControllerManager: %v", err)
	}
	after := c.PIDs()["kube-controller-manager"]
	if after == before || !proc.Running(after) {
		t.Fatalf("controller-manager pid before %d, after %d (running: %v)", before, after, proc.Running(after))
	}
	if proc.Running(before) {
		t.Errorf("old controller-manager pid %d still running", before)
	}
	recs, err := localcluster.Running(c.WorkDir())
	if err != nil {
		t.Fatalf("Running: %v", err)
	}
	if len(recs) != 3 {
		t.Errorf("recorded running processes = %v, want etcd, apiserver and the new controller-manager", recs)
	}
}

func onDeleteStatefulSet(name string, replicas int32) *appsv1.StatefulSet {
	labels := map[string]string{"app": name}
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: appsv1.StatefulSetSpec{
			Replicas:            ptr.To(replicas),
			Selector:            &metav1.LabelSelector{MatchLabels: labels},
			ServiceName:         name,
			PodManagementPolicy: appsv1.ParallelPodManagement,
			UpdateStrategy:      appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{Name: "etcd", Image: "etcd:test"}},
				},
			},
		},
	}
}

func stsPods(ctx context.Context, cs kubernetes.Interface, sts *appsv1.StatefulSet) ([]corev1.Pod, error) {
	list, err := cs.CoreV1().Pods(sts.Namespace).List(ctx, metav1.ListOptions{
		LabelSelector: metav1.FormatLabelSelector(sts.Spec.Selector),
	})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

// podIdentities describes differences in pod UIDs or revision labels.
func podIdentities(before, after []corev1.Pod) string {
	key := func(pods []corev1.Pod) map[string]string {
		m := map[string]string{}
		for _, p := range pods {
			m[p.Name] = fmt.Sprintf("%s/%s", p.UID, p.Labels[appsv1.ControllerRevisionHashLabelKey])
		}
		return m
	}
	b, a := key(before), key(after)
	var diffs []string
	for name, v := range b {
		if a[name] != v {
			diffs = append(diffs, fmt.Sprintf("%s: %s -> %q", name, v, a[name]))
		}
	}
	if len(a) != len(b) {
		diffs = append(diffs, fmt.Sprintf("%d pods before, %d after", len(b), len(a)))
	}
	return strings.Join(diffs, "; ")
}

func waitUntil(t *testing.T, ctx context.Context, what string, cond wait.ConditionWithContextFunc) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, eventually)
	defer cancel()
	if err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}
