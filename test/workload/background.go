package workload

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// background is the start-once, stop-once lifecycle the writer and the monitors share: one loop
// goroutine bounded by MaxRun, which closes done when it returns.
type background struct {
	started bool
	cancel  context.CancelFunc
	done    chan struct{}
}

func newBackground() background { return background{done: make(chan struct{})} }

// start launches run; the caller holds its instrument's lock.
func (b *background) start(ctx context.Context, what string, maxRun time.Duration, run func(context.Context)) error {
	if b.started {
		return fmt.Errorf("%s already started", what)
	}
	b.started = true
	ctx, b.cancel = context.WithTimeout(ctx, maxRun)
	go run(ctx)
	return nil
}

// stop cancels the loop and waits for it to return, unless ctx ends first. mu is the
// instrument's lock, which guards started and cancel.
func (b *background) stop(ctx context.Context, mu *sync.Mutex) {
	mu.Lock()
	started := b.started
	if b.cancel != nil {
		b.cancel()
	}
	mu.Unlock()
	if started {
		select {
		case <-b.done:
		case <-ctx.Done():
		}
	}
}
