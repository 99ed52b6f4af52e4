package workload

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
)

// instrumentDefaults fills the options every instrument has: the deadline of one request
// (DefaultRequestTimeout; nil where the instrument names it otherwise), MaxRun (DefaultMaxRun)
// and the logger (discard).
func instrumentDefaults(requestTimeout, maxRun *time.Duration, logger *logr.Logger) {
	if requestTimeout != nil && *requestTimeout <= 0 {
		*requestTimeout = DefaultRequestTimeout
	}
	if *maxRun <= 0 {
		*maxRun = DefaultMaxRun
	}
	if logger.GetSink() == nil {
		*logger = logr.Discard()
	}
}

// background is the lifecycle every instrument shares: started once, one loop goroutine bounded
// by MaxRun, stopped once, its connections closed after the loop returned. The instruments embed
// it so that each holds only what it measures.
type background struct {
	// mu is the instrument's one lock: it guards the lifecycle below and everything the
	// instrument records, so a Snapshot sees both from the same moment.
	mu sync.Mutex

	what   string
	maxRun time.Duration
	// release closes what the loop used (connections); it runs once the loop is done, so no
	// request is cut off by its own instrument.
	release []func()

	started, stopped time.Time
	cancel           context.CancelFunc
	done             chan struct{}
}

// setUp names the instrument for its errors and registers what Stop releases; the constructors
// call it before anything else touches the instrument.
func (b *background) setUp(what string, maxRun time.Duration, release ...func()) {
	b.what, b.maxRun, b.release = what, maxRun, release
	b.done = make(chan struct{})
}

// start launches loop once and stamps the start; the stop is stamped when loop returns.
func (b *background) start(ctx context.Context, loop func(context.Context)) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.started.IsZero() {
		return fmt.Errorf("%s already started", b.what)
	}
	b.started = time.Now()
	ctx, b.cancel = context.WithTimeout(ctx, b.maxRun)
	go func() {
		defer close(b.done)
		defer func() {
			b.mu.Lock()
			b.stopped = time.Now()
			b.mu.Unlock()
		}()
		loop(ctx)
	}()
	return nil
}

// halt cancels the loop, waits for it to return unless ctx ends first, and releases what it used.
func (b *background) halt(ctx context.Context) {
	b.mu.Lock()
	started := !b.started.IsZero()
	if b.cancel != nil {
		b.cancel()
	}
	b.mu.Unlock()
	if started {
		select {
		case <-b.done:
		case <-ctx.Done():
		}
	}
	for _, r := range b.release {
		r()
	}
}

// until is the end of what was measured so far: the stop, or now while running. The caller
// holds mu.
func (b *background) until() time.Time {
	if b.stopped.IsZero() {
		return time.Now()
	}
	return b.stopped
}

// paced calls step every interval until ctx ends or step returns false. A step that runs late is
// not made up in a burst: the next one starts at once, then the pace resumes.
func paced(ctx context.Context, interval time.Duration, step func() bool) {
	for next := time.Now(); sleepUntil(ctx, next); {
		next = next.Add(interval)
		if !step() {
			return
		}
		if now := time.Now(); next.Before(now) {
			next = now
		}
	}
}
