package ondelete

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/event"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/decision"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/memberaccess"
)

// Rejoin watch outcomes, the values of the outcome label of Metrics.RejoinWatches.
const (
	// RejoinWatchServed: a member watched served a read and the StatefulSet was enqueued.
	RejoinWatchServed = "served"
	// RejoinWatchExpired: no reconcile extended the watch in time; the controller's own requeue
	// asks next.
	RejoinWatchExpired = "expired"
	// RejoinWatchReplaced: the rollout began to wait on other members; a new watch took over.
	RejoinWatchReplaced = "replaced"
	// RejoinWatchStopped: the StatefulSet went away, or the manager is stopping.
	RejoinWatchStopped = "stopped"
)

// rejoinWatch ends a rollout's wait on a replaced member the moment the member serves, instead
// of at the controller's next poll. No Kubernetes event says when a starting member can serve
// (its readiness probe comes later, which is what the rejoin read gets ahead of), and polling
// with whole reconciles is slow to notice and costly: each one reads the StatefulSet and pods
// from the apiserver on a machine whose CPU the starting member needs. So while a rollout waits,
// one goroutine per StatefulSet asks only the awaited members for a linearizable read, a round
// every pace, and enqueues the StatefulSet once one of them served. The reconcile that follows
// reads again and decides: the watch only wakes it, it never decides anything.
type rejoinWatch struct {
	// events is the channel the controller watches (RegisterWithManager); a send never blocks:
	// when it is full the StatefulSet is queued already, or its requeue asks soon.
	events chan event.GenericEvent
	pace   time.Duration
	// ended is told each watch's StatefulSet and how the watch ended (Metrics.RejoinWatches).
	ended func(sts types.NamespacedName, outcome string)

	mu      sync.Mutex
	running map[types.NamespacedName]*rejoinWatcher
}

// rejoinWatcher is one StatefulSet's watch.
type rejoinWatcher struct {
	targets  []memberaccess.Target
	deadline time.Time
	cancel   context.CancelFunc
	outcome  string // why it was cancelled, set with cancel
	// done is closed once the goroutine has ended: no read of it is in flight any more.
	done chan struct{}
}

// rejoinRead asks the members watched for a linearizable read and tells whether any served.
type rejoinRead func(ctx context.Context) bool

func newRejoinWatch(pace time.Duration, ended func(sts types.NamespacedName, outcome string)) *rejoinWatch {
	return &rejoinWatch{
		events:  make(chan event.GenericEvent, 64),
		pace:    pace,
		ended:   ended,
		running: map[types.NamespacedName]*rejoinWatcher{},
	}
}

// watch makes sure the awaited members of sts, targets, are watched at least for forAtLeast
// from now. A watch of the same targets already running is extended; one of other targets (other
// members, or a member at a new address) is replaced. ctx bounds the watch beyond that:
// controller-runtime cancels a reconcile's context when the manager stops.
func (w *rejoinWatch) watch(ctx context.Context, sts *appsv1.StatefulSet, targets []memberaccess.Target, forAtLeast time.Duration, read rejoinRead) {
	key := types.NamespacedName{Namespace: sts.Namespace, Name: sts.Name}
	deadline := time.Now().Add(forAtLeast)
	targets = slices.SortedFunc(slices.Values(targets), func(a, b memberaccess.Target) int { return strings.Compare(a.Name, b.Name) })

	w.mu.Lock()
	defer w.mu.Unlock()
	prev := w.running[key]
	if prev != nil && slices.Equal(prev.targets, targets) {
		prev.deadline = deadline
		return
	}
	if prev != nil {
		prev.outcome = RejoinWatchReplaced
		prev.cancel()
	}
	ctx, cancel := context.WithCancel(ctx)
	wr := &rejoinWatcher{targets: targets, deadline: deadline, cancel: cancel, done: make(chan struct{})}
	w.running[key] = wr
	obj := sts.DeepCopy()
	log := logr.FromContextOrDiscard(ctx).WithValues("awaiting", targetNames(targets))
	go func() {
		defer close(wr.done)
		outcome := w.run(ctx, wr, read)
		w.mu.Lock()
		if w.running[key] == wr {
			delete(w.running, key)
		}
		if wr.outcome != "" {
			outcome = wr.outcome
		}
		w.mu.Unlock()
		cancel()
		if outcome == RejoinWatchServed {
			log.V(1).Info("Replaced member serves; deciding now")
			select {
			case w.events <- event.GenericEvent{Object: obj}:
			default:
			}
		}
		w.ended(key, outcome)
	}()
}

// run starts a round of reads every pace (or as soon as the last has ended, if it took longer)
// until a member serves, the deadline passes or ctx ends. The first round waits one pace: the
// reconcile that started the watch has just asked.
func (w *rejoinWatch) run(ctx context.Context, wr *rejoinWatcher, read rejoinRead) string {
	t := time.NewTimer(w.pace)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return RejoinWatchStopped
		case <-t.C:
		}
		w.mu.Lock()
		expired := time.Now().After(wr.deadline)
		w.mu.Unlock()
		if expired {
			return RejoinWatchExpired
		}
		t.Reset(w.pace)
		if read(ctx) {
			return RejoinWatchServed
		}
	}
}

// stop ends the watch of sts, if any, e.g. because the StatefulSet is gone, and returns once no
// read of it is in flight: a read racing the caller's Pool.Forget could otherwise open the
// forgotten cluster's connections again.
func (w *rejoinWatch) stop(key types.NamespacedName) {
	w.mu.Lock()
	wr := w.running[key]
	if wr != nil {
		wr.outcome = RejoinWatchStopped
		wr.cancel()
		delete(w.running, key)
	}
	w.mu.Unlock()
	if wr != nil {
		<-wr.done
	}
}

// watching names the members watched for sts, for tests.
func (w *rejoinWatch) watching(key types.NamespacedName) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if wr := w.running[key]; wr != nil {
		return targetNames(wr.targets)
	}
	return nil
}

func targetNames(targets []memberaccess.Target) []string {
	names := make([]string, len(targets))
	for i, t := range targets {
		names[i] = t.Name
	}
	return names
}

// RejoinWakeups is the channel the rejoin watch sends a StatefulSet on once a member its
// rollout waits on serves; RegisterWithManager watches it. A caller running the reconciler
// without a manager can wait on it the same way.
func (r *Reconciler) RejoinWakeups() <-chan event.GenericEvent { return r.rejoin.events }

// watchRejoin has the rejoin watch ask the replaced members o still awaits. The reads share the
// cluster's pooled connections (LinearizableReadsOf leaves the other members' alone), so the
// connection the watch saw serve is the one the decision it wakes reads through.
func (r *Reconciler) watchRejoin(ctx context.Context, etcd *druidv1alpha1.Etcd, sts *appsv1.StatefulSet, o decision.Outcome) {
	creds, err := r.cfg.Access.ClientTLS(ctx, etcd)
	if err != nil {
		// Decide's own reads failed the same way and said so; the requeue asks again.
		return
	}
	var targets []memberaccess.Target
	for _, t := range memberaccess.Targets(etcd, o.Pods) {
		if slices.Contains(o.AwaitingRejoin, t.Name) && !slices.Contains(o.Rejoined, t.Name) {
			targets = append(targets, t)
		}
	}
	if len(targets) == 0 {
		return
	}
	members := memberaccess.NewCluster(r.cfg.Members, etcd, memberaccess.ForMembers, creds, nil)
	r.rejoin.watch(ctx, sts, targets, 2*r.cfg.RequeueInterval, func(ctx context.Context) bool {
		ctx, cancel := context.WithTimeout(ctx, rejoinReadTimeout)
		defer cancel()
		served, _ := members.LinearizableReadsOf(ctx, targets)
		return len(served) > 0
	})
}
