package backupstore

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"time"
)

// Backoff bounds the retries of a Retrying store: up to Attempts tries of one call, waiting
// Initial after the first failure, twice as long after each further one, never more than Max.
type Backoff struct {
	Attempts int
	Initial  time.Duration
	Max      time.Duration
}

// DefaultBackoff rides out a store restarting or a network blip (1+2+4+8 s between five tries,
// 15 s in all) without holding a restore for long on a store that is really gone: the init step
// tries again at its next poll anyway.
var DefaultBackoff = Backoff{Attempts: 5, Initial: time.Second, Max: 30 * time.Second}

// Delay is the wait after the failed attempt-th try (1-based).
func (b Backoff) Delay(attempt int) time.Duration {
	d := b.Initial
	for i := 1; i < attempt && d < b.Max; i++ {
		d *= 2
	}
	return min(d, b.Max)
}

func (b Backoff) withDefaults() Backoff {
	if b.Attempts < 1 {
		b.Attempts = DefaultBackoff.Attempts
	}
	if b.Initial <= 0 {
		b.Initial = DefaultBackoff.Initial
	}
	if b.Max < b.Initial {
		b.Max = max(DefaultBackoff.Max, b.Initial)
	}
	return b
}

// Retrying is s with List, Stat and Get retried on transient errors, with capped exponential
// backoff. Not retried: a missing object (ErrNotFound), an object that is not what was written
// (*VerifyError), and the caller's context ending: trying again changes none of them. Put and
// Delete pass through: a Put consumes its reader, and the backup loop retries both at its next
// round.
func Retrying(s Store, b Backoff) Store {
	return &retrying{Store: s, b: b.withDefaults()}
}

type retrying struct {
	Store
	b Backoff
}

// Transient says whether err is worth another try.
func Transient(err error) bool {
	var verr *VerifyError
	return err != nil && !errors.Is(err, ErrNotFound) && !errors.As(err, &verr) &&
		!errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}

func (r *retrying) List(ctx context.Context, prefix string) ([]Object, error) {
	return retry(ctx, r.b, func() ([]Object, error) { return r.Store.List(ctx, prefix) })
}

func (r *retrying) Stat(ctx context.Context, key string) (Object, error) {
	return retry(ctx, r.b, func() (Object, error) { return r.Store.Stat(ctx, key) })
}

// Get retries the opening, and counts the first bytes as part of it: an S3 client asks for the
// object's body only at the first read, so a failure there is as transient as one at opening.
// Once bytes came, a failure is the caller's (a restore stops at the last good delta).
func (r *retrying) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	return retry(ctx, r.b, func() (io.ReadCloser, error) {
		rc, err := r.Store.Get(ctx, key)
		if err != nil {
			return nil, err
		}
		br := bufio.NewReaderSize(rc, 32<<10)
		if _, err := br.Peek(1); err != nil && !errors.Is(err, io.EOF) {
			_ = rc.Close()
			return nil, err
		}
		return readCloser{Reader: br, Closer: rc}, nil
	})
}

// Retry runs call until it succeeds or fails with an error that is not Transient, at most
// b.Attempts times with b's backoff in between: for a call Retrying does not cover, such as a Put
// whose caller can open its reader again for each try.
func Retry[T any](ctx context.Context, b Backoff, call func() (T, error)) (T, error) {
	return retry(ctx, b.withDefaults(), call)
}

func retry[T any](ctx context.Context, b Backoff, call func() (T, error)) (T, error) {
	for attempt := 1; ; attempt++ {
		v, err := call()
		if err == nil || !Transient(err) || ctx.Err() != nil {
			return v, err
		}
		if attempt >= b.Attempts {
			return v, fmt.Errorf("gave up after %d attempts: %w", attempt, err)
		}
		t := time.NewTimer(b.Delay(attempt))
		select {
		case <-ctx.Done():
			t.Stop()
			return v, fmt.Errorf("%w (stopped retrying after %d attempts: %w)", err, attempt, ctx.Err())
		case <-t.C:
		}
	}
}
