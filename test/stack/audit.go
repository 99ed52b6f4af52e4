package stack

import (
	"context"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/etcd-conductor/etcd-conductor/internal/decide/quorum"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/rollout"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
	"github.com/etcd-conductor/etcd-conductor/test/framework"
	"github.com/etcd-conductor/etcd-conductor/test/workload"
)

// Deletion is one pod deletion as the auditor saw it: the moment the pod got its
// deletionTimestamp, and the state of the other pods just before.
type Deletion struct {
	At            time.Time `json:"at"`
	Pod           string    `json:"pod"`
	Participating bool      `json:"participating"`
	Revision      string    `json:"revision"`
	// Violation is set when a participating pod was deleted while another pod was terminating or
	// missing, or while an updated pod was not participating: what the controller must never do.
	Violation string `json:"violation,omitempty"`
	// Strategy is the StatefulSet's update strategy when the deletion was seen: under
	// RollingUpdate the deletion is the StatefulSet controller's, under OnDelete ours.
	Strategy appsv1.StatefulSetUpdateStrategyType `json:"strategy"`
	// RejoinedByProbe names updated pods that were not Ready yet but whose /readyz passed at the
	// deletion (the quorum monitor's last answer before it, or the auditor's own probe): back in
	// the quorum, as the controller may know from its own read before the kubelet probes them
	// again (rejoinByRead).
	RejoinedByProbe []string `json:"rejoinedByProbe,omitempty"`
}

// DeletionAuditor watches an Etcd's pods and StatefulSet and checks DEP-07's invariant at every
// deletion, whoever made it (Deletion.Strategy tells whose it was likely to be: the two watches are
// not ordered with each other, so a deletion right at a strategy switch may be misattributed). Pod events arrive in resourceVersion order on one watch, so the view at a deletion
// is at least as fresh as what the controller read before deleting.
type DeletionAuditor struct {
	cluster *EtcdCluster
	cancel  context.CancelFunc
	done    chan struct{}

	mu             sync.Mutex
	pods           map[string]*corev1.Pod
	updateRevision string
	strategy       appsv1.StatefulSetUpdateStrategyType
	deletions      []Deletion
	watchErr       error
	// concurrent is how many participating members the controller may replace at once within
	// the quorum's headroom (1: DEP-07 as written).
	concurrent int
	// monitor, when set, tells which members served /readyz before a deletion (rejoined).
	monitor *workload.QuorumMonitor
}

// AuditDeletions starts watching. Stop returns what it saw. concurrent > 1 judges against
// quorum-headroom batches of that size (see judge); 0 or 1 against DEP-07's one at a time.
// monitor (may be nil) is the quorum monitor of the same members: what it saw before a deletion
// is evidence of who was back (rejoined).
func (c *EtcdCluster) AuditDeletions(ctx context.Context, concurrent int, monitor *workload.QuorumMonitor) (*DeletionAuditor, error) {
	ctx, cancel := context.WithCancel(ctx)
	a := &DeletionAuditor{cluster: c, cancel: cancel, done: make(chan struct{}), pods: map[string]*corev1.Pod{}, concurrent: max(concurrent, 1),
		monitor: monitor}
	podWatch, err := c.stack.Kube.CoreV1().Pods(c.Namespace).Watch(ctx, metav1.ListOptions{LabelSelector: c.memberSelector()})
	if err != nil {
		cancel()
		return nil, fmt.Errorf("watching pods: %w", err)
	}
	stsWatch, err := c.stack.Kube.AppsV1().StatefulSets(c.Namespace).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + c.Name})
	if err != nil {
		cancel()
		podWatch.Stop()
		return nil, fmt.Errorf("watching the StatefulSet: %w", err)
	}
	go a.run(ctx, podWatch, stsWatch)
	return a, nil
}

func (a *DeletionAuditor) run(ctx context.Context, pods, sts watch.Interface) {
	defer close(a.done)
	defer pods.Stop()
	defer sts.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-sts.ResultChan():
			if !ok {
				a.fail(fmt.Errorf("StatefulSet watch closed"))
				return
			}
			if s, isSts := ev.Object.(*appsv1.StatefulSet); isSts {
				a.mu.Lock()
				a.updateRevision = s.Status.UpdateRevision
				a.strategy = s.Spec.UpdateStrategy.Type
				a.mu.Unlock()
			}
		case ev, ok := <-pods.ResultChan():
			if !ok {
				a.fail(fmt.Errorf("pod watch closed"))
				return
			}
			pod, isPod := ev.Object.(*corev1.Pod)
			if !isPod {
				continue
			}
			a.observe(ev.Type, pod)
		}
	}
}

func (a *DeletionAuditor) fail(err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.watchErr == nil {
		a.watchErr = err
	}
}

func (a *DeletionAuditor) observe(t watch.EventType, pod *corev1.Pod) {
	a.mu.Lock()
	defer a.mu.Unlock()
	prev := a.pods[pod.Name]
	if t == watch.Deleted {
		if prev != nil && prev.UID == pod.UID {
			delete(a.pods, pod.Name)
		}
		return
	}
	if pod.DeletionTimestamp != nil && (prev == nil || prev.UID != pod.UID || prev.DeletionTimestamp == nil) {
		before := prev
		if before == nil || before.UID != pod.UID {
			before = pod
		}
		a.deletions = append(a.deletions, a.judge(before))
	}
	a.pods[pod.Name] = pod.DeepCopy()
}

// judge evaluates a deletion against the state just before it. One at a time (DEP-07): a
// participating pod must not go while another is terminating, missing, or updated and not
// participating. With concurrency: it must not go when, with it, more voters would be unavailable
// (not participating, terminating or missing) than the batch size and the quorum's headroom allow.
func (a *DeletionAuditor) judge(pod *corev1.Pod) Deletion {
	observed := framework.ObservePod(pod)
	d := Deletion{At: time.Now(), Pod: pod.Name, Participating: observed.Participating,
		Revision: observed.Revision, Strategy: a.strategy}
	if !d.Participating {
		return d
	}
	if a.concurrent > 1 {
		return a.judgeBatch(pod, d)
	}
	var problems []string
	for i := 0; i < a.cluster.Replicas; i++ {
		name := a.cluster.PodName(i)
		if name == pod.Name {
			continue
		}
		other, ok := a.pods[name]
		switch {
		case !ok:
			problems = append(problems, name+" missing")
		case other.DeletionTimestamp != nil:
			problems = append(problems, name+" terminating")
		case a.updateRevision != "" && !rollout.IsOutdated(framework.ObservePod(other), a.updateRevision) && !framework.ObservePod(other).Participating:
			if a.rejoined(other) {
				d.RejoinedByProbe = append(d.RejoinedByProbe, name)
				continue
			}
			problems = append(problems, name+" updated but not participating")
		}
	}
	sort.Strings(problems)
	d.Violation = strings.Join(problems, ", ")
	return d
}

// rejoined tells whether an updated pod that is not Ready served its /readyz, the probe's own
// check, at the deletion rather than at the kubelet's next period: the quorum monitor's last
// answer from it before now said so, or it answers now. Both are needed: the monitor probes a
// round at a time, so a member back within the last round is only seen by asking now; and
// asking now comes after the deletion, which, when it takes the leader, briefly fails every
// member's linearizable read.
func (a *DeletionAuditor) rejoined(pod *corev1.Pod) bool {
	if a.monitor != nil && servedLastBefore(a.monitor.Snapshot().Participation, pod.Name, time.Now()) {
		return true
	}
	if pod.Status.PodIP == "" || a.cluster.PKI == nil {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), rejoinProbeTimeout)
	defer cancel()
	ep := workload.Endpoint{Name: pod.Name, Address: net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(int(resources.DefaultClientPort))),
		ServerName: resources.MemberDNSName(a.cluster.Name, a.cluster.Namespace, pod.Name)}
	return workload.ProbeReadyzOnce(ctx, a.cluster.PKI.ClientMaterial(), ep) == nil
}

// servedLastBefore tells whether the last participation sample of member before t says it served.
func servedLastBefore(samples []workload.ParticipationSample, member string, t time.Time) bool {
	served := false
	for _, s := range samples {
		if s.Member == member && s.At.Before(t) {
			served = s.Participating
		}
	}
	return served
}

// rejoinProbeTimeout is the readiness probe's own timeout (resources: timeoutSeconds 2).
const rejoinProbeTimeout = 2 * time.Second

func (a *DeletionAuditor) judgeBatch(pod *corev1.Pod, d Deletion) Deletion {
	replicas := a.cluster.Replicas
	allowed := min(a.concurrent, quorum.Headroom(replicas))
	var unavailable []string
	for i := 0; i < replicas; i++ {
		name := a.cluster.PodName(i)
		other, ok := a.pods[name]
		switch {
		case name == pod.Name:
		case !ok:
			unavailable = append(unavailable, name+" missing")
		case other.DeletionTimestamp != nil:
			unavailable = append(unavailable, name+" terminating")
		case !framework.ObservePod(other).Participating:
			if a.updateRevision != "" && !rollout.IsOutdated(framework.ObservePod(other), a.updateRevision) && a.rejoined(other) {
				d.RejoinedByProbe = append(d.RejoinedByProbe, name)
				continue
			}
			unavailable = append(unavailable, name+" not participating")
		}
	}
	if len(unavailable)+1 > allowed {
		sort.Strings(unavailable)
		d.Violation = fmt.Sprintf("%d voters unavailable with it, batch size and headroom allow %d: %s",
			len(unavailable)+1, allowed, strings.Join(unavailable, ", "))
	}
	return d
}

// Stop ends the watch and returns every deletion seen, and an error if the watch broke (then the
// audit is incomplete and must not pass).
func (a *DeletionAuditor) Stop() ([]Deletion, error) {
	a.cancel()
	<-a.done
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]Deletion(nil), a.deletions...), a.watchErr
}
