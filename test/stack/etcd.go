package stack

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/rollout"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
	"github.com/etcd-conductor/etcd-conductor/test/framework"
	"github.com/etcd-conductor/etcd-conductor/tls/testpki"
)

// EtcdCluster is an Etcd created on the stack, with the PKI its Secrets hold.
type EtcdCluster struct {
	stack     *Stack
	Namespace string
	Name      string
	Replicas  int
	PKI       *testpki.EtcdPKI

	// mu guards the pod informer that feeds Endpoints (endpoints.go).
	mu              sync.Mutex
	podInformer     cache.SharedIndexInformer
	informerFactory informers.SharedInformerFactory
	stopInformer    chan struct{}
}

// CreateEtcd creates a namespace enforcing the restricted Pod Security Standard, TLS Secrets and
// the Etcd. A namespace ending in "-" is a
// prefix of a generated name, so that a scenario can run many times in one stack; the cluster's
// Namespace is the name it got. DeleteNamespace removes it again.
func (s *Stack) CreateEtcd(ctx context.Context, namespace, name string, replicas int32, image string) (*EtcdCluster, error) {
	return s.CreateEtcdWith(ctx, namespace, name, replicas, image, nil)
}

// CreateEtcdWith is CreateEtcd with a hook that may create more objects in the namespace (a
// backup Secret, say) and change the Etcd before it is created.
func (s *Stack) CreateEtcdWith(ctx context.Context, namespace, name string, replicas int32, image string,
	prepare func(ctx context.Context, namespace string, etcd *druidv1alpha1.Etcd) error) (*EtcdCluster, error) {
	namespace, err := framework.CreateNamespace(ctx, s.Client, namespace, framework.RestrictedPodSecurity())
	if err != nil {
		return nil, err
	}
	pki, err := framework.CreateTLSSecrets(ctx, s.Client, namespace, name)
	if err != nil {
		return nil, err
	}
	etcd := framework.NewEtcd(namespace, name, replicas, image)
	if prepare != nil {
		if err := prepare(ctx, namespace, etcd); err != nil {
			return nil, fmt.Errorf("preparing Etcd %s/%s: %w", namespace, name, err)
		}
	}
	if err := s.Client.Create(ctx, etcd); err != nil {
		return nil, fmt.Errorf("creating Etcd %s/%s: %w", namespace, name, err)
	}
	c := &EtcdCluster{stack: s, Namespace: namespace, Name: name, Replicas: int(replicas), PKI: pki}
	s.track(c)
	return c, nil
}

// DeleteNamespace removes a test namespace the way a user would: the namespace controller
// deletes what is in it, the node simulator finishes the pods and reclaims their volumes. It then
// lifts the simulator's faults for the namespace and checks no pod of it is left running.
func (s *Stack) DeleteNamespace(ctx context.Context, namespace string) error {
	s.untrack(namespace)
	if err := framework.DeleteNamespace(ctx, s.Client, namespace, 3*time.Minute); err != nil {
		return err
	}
	// A pod worker lets go of its pod just after it has finished it in the API.
	var left []string
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		left = s.Sim.ForgetNamespace(namespace)
		return len(left) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("namespace %s is gone but the node simulator still holds %v: %w", namespace, left, err)
	}
	return nil
}

// RemoveMembers deletes the Etcd, then its pods at once (grace period 0, until none is left):
// the namespace controller then finds no pod to wait for (a terminating pod makes it requeue the
// namespace after the pod's whole grace period, ~45 s per namespace), and a hung member does not
// sit out its grace period. The Etcd goes first, or the StatefulSet would recreate the pods.
func (s *Stack) RemoveMembers(ctx context.Context, c *EtcdCluster) error {
	if etcd, err := c.Get(ctx); err == nil {
		if err := s.Client.Delete(ctx, etcd); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting the Etcd: %w", err)
		}
	}
	pods := s.Kube.CoreV1().Pods(c.Namespace)
	err := wait.PollUntilContextTimeout(ctx, 300*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := pods.List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		for _, p := range list.Items {
			_ = pods.Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
		}
		return len(list.Items) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("pods of %s still there: %w", c.Namespace, err)
	}
	return nil
}

// PodName is the name of ordinal i; PodKey is "namespace/name", as the simulator's faults take it.
func (c *EtcdCluster) PodName(i int) string { return fmt.Sprintf("%s-%d", c.Name, i) }
func (c *EtcdCluster) PodKey(i int) string  { return c.Namespace + "/" + c.PodName(i) }

// Get reads the Etcd.
func (c *EtcdCluster) Get(ctx context.Context) (*druidv1alpha1.Etcd, error) {
	e := &druidv1alpha1.Etcd{}
	return e, c.stack.Client.Get(ctx, types.NamespacedName{Namespace: c.Namespace, Name: c.Name}, e)
}

// SetImage changes spec.etcd.image: the image bump every scenario makes.
func (c *EtcdCluster) SetImage(ctx context.Context, image string) error {
	e, err := c.Get(ctx)
	if err != nil {
		return err
	}
	return framework.SetEtcdImage(ctx, c.stack.Client, e, image)
}

// StatefulSet reads the member StatefulSet.
func (c *EtcdCluster) StatefulSet(ctx context.Context) (*appsv1.StatefulSet, error) {
	sts := &appsv1.StatefulSet{}
	return sts, c.stack.Client.Get(ctx, types.NamespacedName{Namespace: c.Namespace, Name: c.Name}, sts)
}

// EventsWithReason lists "reason: message" of the Events in the cluster's namespace whose reason
// starts with prefix.
func (c *EtcdCluster) EventsWithReason(ctx context.Context, prefix string) ([]string, error) {
	events := &corev1.EventList{}
	if err := c.stack.Client.List(ctx, events, client.InNamespace(c.Namespace)); err != nil {
		return nil, fmt.Errorf("listing the Events of %s: %w", c.Namespace, err)
	}
	var out []string
	for _, ev := range events.Items {
		if strings.HasPrefix(ev.Reason, prefix) {
			out = append(out, ev.Reason+": "+ev.Message)
		}
	}
	return out, nil
}

// Pods lists the member pods, sorted by name.
func (c *EtcdCluster) Pods(ctx context.Context) ([]corev1.Pod, error) {
	list := &corev1.PodList{}
	if err := c.stack.Client.List(ctx, list, client.InNamespace(c.Namespace), client.MatchingLabels(c.memberLabels())); err != nil {
		return nil, err
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	return list.Items, nil
}

// RolloutState says how far the members are: pods at the update revision and ready.
type RolloutState struct {
	UpdateRevision string
	// Image is the etcd image of the StatefulSet's template.
	Image          string
	Updated, Ready int
	Terminating    int
}

func (r RolloutState) String() string {
	return fmt.Sprintf("image %s revision %s: %d updated, %d ready, %d terminating", r.Image, r.UpdateRevision, r.Updated, r.Ready, r.Terminating)
}

// State reads the rollout state.
func (c *EtcdCluster) State(ctx context.Context) (RolloutState, error) {
	sts, err := c.StatefulSet(ctx)
	if err != nil {
		return RolloutState{}, err
	}
	pods, err := c.Pods(ctx)
	if err != nil {
		return RolloutState{}, err
	}
	st := RolloutState{UpdateRevision: sts.Status.UpdateRevision}
	for _, ctr := range sts.Spec.Template.Spec.Containers {
		if ctr.Name == resources.EtcdContainerName {
			st.Image = ctr.Image
		}
	}
	if sts.Status.ObservedGeneration < sts.Generation {
		st.UpdateRevision = "" // the StatefulSet controller has not computed it yet
	}
	// Outdated by the planner's own rule, not one of the test's.
	observed := map[string]rollout.PodState{}
	for _, p := range framework.Observe(sts, pods).Pods {
		observed[p.Name] = p
	}
	for i := range pods {
		p := observed[pods[i].Name]
		if p.Terminating {
			st.Terminating++
			continue
		}
		if st.UpdateRevision != "" && !rollout.IsOutdated(p, st.UpdateRevision) {
			st.Updated++
		}
		if framework.PodReady(&pods[i]) {
			st.Ready++
		}
	}
	return st, nil
}

// WaitConverged waits until the StatefulSet's template runs image, and every member runs the
// update revision and is ready.
func (c *EtcdCluster) WaitConverged(ctx context.Context, image string) error {
	var last RolloutState
	err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		st, err := c.State(ctx)
		if err != nil {
			return false, nil
		}
		last = st
		return st.Image == image && st.Updated == c.Replicas && st.Ready == c.Replicas && st.Terminating == 0, nil
	})
	if err != nil {
		return fmt.Errorf("members of %s/%s did not converge (%s): %w", c.Namespace, c.Name, last, err)
	}
	return nil
}

// WaitNotReady waits, up to a minute, until member i's pod is not Ready (or gone): the fault
// injected into it took effect.
func (c *EtcdCluster) WaitNotReady(ctx context.Context, i int) error {
	name := c.PodName(i)
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := c.Pods(ctx)
		if err != nil {
			return false, nil
		}
		for j := range pods {
			if pods[j].Name == name {
				return !framework.PodReady(&pods[j]), nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("%s still ready a minute after the fault: %w", name, err)
	}
	return nil
}

// DataDirOwners reports, per member pod, the user owning its etcd data directory on the node: the
// user the etcd process ran as when it created the directory, seen from the host rather than
// through anything the process could say about itself.
func (c *EtcdCluster) DataDirOwners(ctx context.Context) (map[string]uint32, error) {
	e, err := c.Get(ctx)
	if err != nil {
		return nil, err
	}
	sts, err := c.StatefulSet(ctx)
	if err != nil {
		return nil, err
	}
	if len(sts.Spec.VolumeClaimTemplates) != 1 {
		return nil, fmt.Errorf("StatefulSet %s/%s has %d claim templates, want the data volume only", c.Namespace, c.Name, len(sts.Spec.VolumeClaimTemplates))
	}
	claim := sts.Spec.VolumeClaimTemplates[0].Name
	mountPath := ""
	for _, ctr := range sts.Spec.Template.Spec.Containers {
		for _, m := range ctr.VolumeMounts {
			if ctr.Name == resources.EtcdContainerName && m.Name == claim {
				mountPath = m.MountPath
			}
		}
	}
	rel, err := filepath.Rel(mountPath, resources.EtcdEnvironment(e)["ETCD_DATA_DIR"])
	if mountPath == "" || err != nil || strings.HasPrefix(rel, "..") {
		return nil, fmt.Errorf("the etcd data dir is not on the %q volume (mounted at %q): %v", claim, mountPath, err)
	}
	owners := map[string]uint32{}
	for i := range c.Replicas {
		dir, err := c.stack.Sim.ClaimDir(ctx, c.Namespace+"/"+claim+"-"+c.PodName(i))
		if err != nil {
			return nil, err
		}
		fi, err := os.Stat(filepath.Join(dir, rel))
		if err != nil {
			return nil, err
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return nil, fmt.Errorf("no owner for %s", filepath.Join(dir, rel))
		}
		owners[c.PodName(i)] = st.Uid
	}
	return owners, nil
}

// PodsChanged says how the member pods of after differ from before: a pod gone, replaced (another
// UID), terminating, or a different count. Empty when every pod is still the same one, which is
// what an operation that must touch no member (a refused change, a chart upgrade, a strategy
// switch) leaves.
func PodsChanged(before, after []corev1.Pod) []string {
	was := map[string]types.UID{}
	for _, p := range before {
		was[p.Name] = p.UID
	}
	var changes []string
	if len(after) != len(before) {
		changes = append(changes, fmt.Sprintf("%d member pods, %d before", len(after), len(before)))
	}
	for _, p := range after {
		switch {
		case was[p.Name] != p.UID:
			changes = append(changes, fmt.Sprintf("pod %s replaced (uid %s, was %s)", p.Name, p.UID, was[p.Name]))
		case !p.DeletionTimestamp.IsZero():
			changes = append(changes, fmt.Sprintf("pod %s terminating", p.Name))
		}
	}
	return changes
}
