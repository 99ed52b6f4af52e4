package helme2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/roles"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/rollout"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
	"github.com/etcd-conductor/etcd-conductor/test/framework"
	"github.com/etcd-conductor/etcd-conductor/test/scenario"
	"github.com/etcd-conductor/etcd-conductor/test/stack"
	"github.com/etcd-conductor/etcd-conductor/test/workload"
)

const etcdContainer = resources.EtcdContainerName

// RolloutOptions describe one image bump under a dead member.
type RolloutOptions struct {
	Namespace, Name string
	Replicas        int32
	From, To        string
	// Dead is the ordinal whose etcd crashes on every start from before the bump until its pod
	// is replaced: a member the update repairs. Negative: no fault.
	Dead int
	// Timeout bounds the rollout after the bump (default 3 minutes); a rollout that does not
	// finish in it is returned with Completed false, not as an error.
	Timeout time.Duration
	// Tick is how often OnTick gets a Frame (default 500 ms).
	Tick   time.Duration
	OnTick func(Frame)
	// Progress receives one line per step before the bump (cluster created, converged, ...).
	Progress func(string)
}

// Frame is what the live view shows at one moment of a rollout.
type Frame struct {
	// Since is the time since the bump.
	Since    time.Duration
	Strategy appsv1.StatefulSetUpdateStrategyType
	Pods     []PodView
	// Reason is the controller's current account of the rollout: the AllMembersUpdated
	// condition's message, else the last operation's description.
	Reason string
	// Writes: acknowledgements per second since the previous frame, totals, and how long since
	// the last acknowledgement while writes fail (0 while writes succeed).
	AcksPerSecond float64
	Acked, Failed int
	CurrentGap    time.Duration
	Done          bool
}

// PodView is one member pod in a Frame.
type PodView struct {
	Name string
	// Revision is the pod's controller-revision-hash without the StatefulSet name prefix.
	Revision      string
	Updated       bool
	Participating bool
	// Role is Leader or Member from the Etcd status, else from the member's Lease; "" unknown.
	Role string
	// State is Running, Terminating, or the etcd container's waiting/terminated reason.
	State string
}

// RolloutResult is what a rollout measured: the runner's Result, the cluster it ran on and the
// last Frame of the live view.
type RolloutResult struct {
	Cluster *stack.EtcdCluster
	scenario.Result
	Last Frame
}

// RunRollout creates the Etcd, waits for it, kills member Dead, then hands the rollout to the
// scenario runner (instruments, a 1 s baseline, the bump, the wait until every member runs the new
// revision and is ready, or Timeout), showing a Frame at every poll.
func RunRollout(ctx context.Context, s *stack.Stack, o RolloutOptions) (*RolloutResult, error) {
	if o.Replicas == 0 {
		o.Replicas = 3
	}
	if o.Timeout == 0 {
		o.Timeout = 3 * time.Minute
	}
	if o.Tick == 0 {
		o.Tick = 500 * time.Millisecond
	}
	progress := o.Progress
	if progress == nil {
		progress = func(string) {}
	}

	cluster, err := s.CreateEtcd(ctx, o.Namespace, o.Name, o.Replicas, o.From)
	if err != nil {
		return nil, err
	}
	progress(fmt.Sprintf("created Etcd %s/%s: %d members, %s, generated TLS", o.Namespace, o.Name, o.Replicas, o.From))
	convergeCtx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	err = cluster.WaitConverged(convergeCtx, o.From)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("initial cluster: %w", err)
	}
	sts, err := cluster.StatefulSet(ctx)
	if err != nil {
		return nil, err
	}
	progress(fmt.Sprintf("all %d members ready (StatefulSet updateStrategy %s)", o.Replicas, sts.Spec.UpdateStrategy.Type))

	if o.Dead >= 0 {
		// The fault is the simulator's, keyed by pod name: it must not outlive this rollout.
		lift, err := cluster.KillUntilReplaced(ctx, o.Dead)
		if err != nil {
			return nil, err
		}
		defer lift()
		if err := waitQuorate(ctx, cluster, cluster.PodName(o.Dead)); err != nil {
			return nil, err
		}
		progress(fmt.Sprintf("killed %s: its etcd now crashes on every start (until its pod is replaced); the others have a leader", cluster.PodName(o.Dead)))
	}

	// The instruments start after the fault: the figures measure the rollout under it.
	res := &RolloutResult{Cluster: cluster}
	var v *viewer
	res.Result, err = scenario.Run(ctx, scenario.Spec{
		Cluster: cluster, Image: o.To,
		Writer: workload.WriterOptions{Rate: 40, RequestTimeout: 200 * time.Millisecond},
		Idle:   time.Second, Timeout: o.Timeout, Tick: o.Tick,
		AtBump: func(context.Context, *scenario.Instruments) error {
			progress(fmt.Sprintf("bumping spec.etcd.image to %s", o.To))
			return nil
		},
		OnTick: func(ctx context.Context, in *scenario.Instruments, done bool) {
			// The view counts from the bump, which the runner stamps just before it.
			if v == nil {
				v = &viewer{stack: s, cluster: cluster, rec: in.Recorder, bumped: in.BumpedAt(), image: o.To}
			}
			frame, err := v.frame(ctx)
			if err != nil {
				return
			}
			frame.Done = done
			res.Last = frame
			if o.OnTick != nil {
				o.OnTick(frame)
			}
		},
	})
	return res, err
}

// waitQuorate waits until every member but dead is ready by /readyz, i.e. the survivors
// have elected a leader: killing the leader costs an election, and that is the fault's cost, not
// the rollout's.
func waitQuorate(ctx context.Context, c *stack.EtcdCluster, dead string) error {
	var lastErr error
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		lastErr = readyzEach(ctx, c, dead)
		return lastErr == nil, nil
	})
	if err != nil {
		return fmt.Errorf("members other than %s never became ready (leader and linearizable read): %w (last: %v)", dead, err, lastErr)
	}
	return nil
}

// readyzEach asks every member but dead for its /readyz, which needs a leader and a linearizable
// read: the quorum monitor's own definition of participating.
func readyzEach(ctx context.Context, c *stack.EtcdCluster, dead string) error {
	eps := c.Endpoints()()
	if len(eps) < c.Replicas {
		return fmt.Errorf("%d of %d members have an address", len(eps), c.Replicas)
	}
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{Proxy: nil}}
	defer client.CloseIdleConnections()
	for _, ep := range eps {
		if ep.Name == dead {
			continue
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, workload.DefaultReadyzURL(ep), nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return fmt.Errorf("%s: %w", ep.Name, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: /readyz %d: %s", ep.Name, resp.StatusCode, strings.TrimSpace(string(body)))
		}
	}
	return nil
}

// viewer reads one Frame at a time from the API server and the writer.
type viewer struct {
	stack     *stack.Stack
	cluster   *stack.EtcdCluster
	rec       *workload.Recorder
	bumped    time.Time
	image     string
	lastAcked int
	lastAt    time.Time
}

func (v *viewer) frame(ctx context.Context) (Frame, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	now := time.Now()
	f := Frame{Since: now.Sub(v.bumped)}

	w := v.rec.Writer().Snapshot()
	f.Acked, f.Failed = w.AckedWrites, w.FailedWrites
	if !v.lastAt.IsZero() {
		f.AcksPerSecond = float64(w.AckedWrites-v.lastAcked) / now.Sub(v.lastAt).Seconds()
	}
	v.lastAcked, v.lastAt = w.AckedWrites, now
	if n := len(w.Failures); n > 0 {
		lastAck := w.Started
		if k := len(w.Acked); k > 0 {
			lastAck = w.Acked[k-1].At
		}
		if w.Failures[n-1].At.After(lastAck) {
			f.CurrentGap = now.Sub(lastAck)
		}
	}

	etcd, err := v.cluster.Get(ctx)
	if err != nil {
		return f, fmt.Errorf("reading the Etcd: %w", err)
	}
	sts, err := v.cluster.StatefulSet(ctx)
	if err != nil {
		return f, fmt.Errorf("reading the StatefulSet: %w", err)
	}
	pods, err := v.cluster.Pods(ctx)
	if err != nil {
		return f, fmt.Errorf("listing pods: %w", err)
	}
	f.Strategy = sts.Spec.UpdateStrategy.Type
	f.Reason = reason(etcd)
	// Until the StatefulSet controller has computed the revision of the bumped template, no pod
	// counts as updated (the old update revision would make every pod look done).
	updateRevision := sts.Status.UpdateRevision
	if sts.Status.ObservedGeneration < sts.Generation || templateImage(sts) != v.image {
		updateRevision = ""
	}
	memberRoles := v.roles(ctx, etcd)
	prefix := sts.Name + "-"
	for i := range pods {
		p := &pods[i]
		observed := framework.ObservePod(p)
		pv := PodView{
			Name:          p.Name,
			Revision:      trimPrefix(observed.Revision, prefix),
			Updated:       updateRevision != "" && !rollout.IsOutdated(observed, updateRevision),
			Participating: observed.Participating && !observed.Terminating,
			Role:          memberRoles[p.Name],
			State:         containerState(p),
		}
		if !pv.Participating {
			pv.Role = ""
		}
		f.Pods = append(f.Pods, pv)
	}
	return f, nil
}

// roles reads each member's role from the Etcd status, and from its Lease where the status has
// none.
func (v *viewer) roles(ctx context.Context, etcd *druidv1alpha1.Etcd) map[string]string {
	out := map[string]string{}
	for _, m := range etcd.Status.Members {
		if m.Role != nil {
			out[m.Name] = string(*m.Role)
		}
	}
	for i := 0; i < v.cluster.Replicas; i++ {
		name := v.cluster.PodName(i)
		if out[name] != "" {
			continue
		}
		lease := &coordinationv1.Lease{}
		key := types.NamespacedName{Namespace: v.cluster.Namespace, Name: resources.MemberLease(etcd, name).Name}
		if err := v.stack.Client.Get(ctx, key, lease); err != nil || lease.Spec.HolderIdentity == nil {
			continue
		}
		if _, _, role, ok := roles.ParseHolderIdentity(*lease.Spec.HolderIdentity); ok {
			out[name] = string(role)
		}
	}
	return out
}

func templateImage(sts *appsv1.StatefulSet) string {
	for _, c := range sts.Spec.Template.Spec.Containers {
		if c.Name == etcdContainer {
			return c.Image
		}
	}
	return ""
}

func reason(etcd *druidv1alpha1.Etcd) string {
	if g := etcd.Status.ObservedGeneration; g == nil || *g < etcd.Generation {
		return "(the operator has not reconciled the latest spec yet)"
	}
	for _, c := range etcd.Status.Conditions {
		if c.Type == druidv1alpha1.ConditionTypeAllMembersUpdated && c.Message != "" {
			return c.Message
		}
	}
	if op := etcd.Status.LastOperation; op != nil {
		return op.Description
	}
	return ""
}

func containerState(p *corev1.Pod) string {
	if p.DeletionTimestamp != nil {
		return "Terminating"
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name != etcdContainer {
			continue
		}
		switch {
		case cs.State.Running != nil:
			return "Running"
		case cs.State.Waiting != nil:
			return cs.State.Waiting.Reason
		case cs.State.Terminated != nil:
			return cs.State.Terminated.Reason
		}
	}
	return string(p.Status.Phase)
}

func trimPrefix(s, prefix string) string {
	if len(s) > len(prefix) && s[:len(prefix)] == prefix {
		return s[len(prefix):]
	}
	return s
}
