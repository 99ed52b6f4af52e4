package copytask

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/types"

	"github.com/etcd-conductor/etcd-conductor/internal/store/backupcopy"
)

// copies runs the tasks' copies off the reconcile goroutines, at most slots at once: a copy takes
// as long as its objects take to stream, and a reconcile that waited for it would hold a worker
// (and, through the queue, every other task) for that long. A reconcile starts a copy and
// requeues; a later one takes its outcome. Nothing is kept on disk: after a restart the next
// reconcile starts the copy again, which skips every object the target already holds.
type copies struct {
	mu      sync.Mutex
	slots   int
	base    context.Context
	stopAll context.CancelFunc
	jobs    map[types.NamespacedName]*copyJob
}

// copyJob is one task's copy, for one incarnation (UID) and generation of the task.
type copyJob struct {
	uid        types.UID
	generation int64
	cancel     context.CancelFunc
	done       chan struct{}
	// res and err are set before done is closed.
	res backupcopy.Result
	err error
}

func (j *copyJob) finished() bool {
	select {
	case <-j.done:
		return true
	default:
		return false
	}
}

func newCopies(slots int) *copies {
	base, stop := context.WithCancel(context.Background())
	return &copies{slots: max(slots, 1), base: base, stopAll: stop, jobs: map[types.NamespacedName]*copyJob{}}
}

// job is the copy of key's task, nil when none was started (or it was for another incarnation or
// generation of the task, which is then cancelled and forgotten).
func (c *copies) job(key types.NamespacedName, uid types.UID, generation int64) *copyJob {
	c.mu.Lock()
	defer c.mu.Unlock()
	j := c.jobs[key]
	if j != nil && (j.uid != uid || j.generation != generation) {
		j.cancel()
		delete(c.jobs, key)
		return nil
	}
	return j
}

// start runs run for key's task unless every slot is taken (started false). A copy that finished
// holds no slot.
func (c *copies) start(key types.NamespacedName, uid types.UID, generation int64, run func(ctx context.Context) (backupcopy.Result, error)) (started bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.jobs[key]; ok {
		return false
	}
	busy := 0
	for _, j := range c.jobs {
		if !j.finished() {
			busy++
		}
	}
	if busy >= c.slots {
		return false
	}
	ctx, cancel := context.WithCancel(c.base)
	j := &copyJob{uid: uid, generation: generation, cancel: cancel, done: make(chan struct{})}
	c.jobs[key] = j
	go func() {
		defer close(j.done)
		defer cancel()
		j.res, j.err = run(ctx)
	}()
	return true
}

// forget cancels key's copy, if any, and drops it (its outcome taken, or its task gone).
func (c *copies) forget(key types.NamespacedName) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if j := c.jobs[key]; j != nil {
		j.cancel()
		delete(c.jobs, key)
	}
}

// stop cancels every copy (the manager stops).
func (c *copies) stop() { c.stopAll() }
