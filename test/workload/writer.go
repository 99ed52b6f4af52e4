package workload

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/go-logr/logr"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	conductortls "github.com/etcd-conductor/etcd-conductor/tls"
)

const (
	DefaultWriteRate      = 50.0
	DefaultRequestTimeout = 200 * time.Millisecond
	// DefaultMaxRun stops an instrument that nobody stopped.
	DefaultMaxRun = 30 * time.Minute

	// KeyPrefix is where all writers put their keys: KeyPrefix + "<run>/<seq>".
	KeyPrefix = "/workload/"

	// roundPause is the pause after every member failed one attempt in a row: long enough not
	// to spin on refused connections, short against the outages being measured.
	roundPause = 20 * time.Millisecond
	// maxRecords bounds the per-event lists; the counters keep counting past it.
	maxRecords = 200_000
)

// WriterOptions tunes a Writer. Zero values take the defaults.
type WriterOptions struct {
	// Run names this run's keys; defaults to a value unique to the start time.
	Run string
	// Rate is the target number of writes per second (DefaultWriteRate). A write that is
	// retried holds the next one back; missed slots are not made up in a burst.
	Rate float64
	// RequestTimeout is the deadline of one Put on one member (DefaultRequestTimeout). Keep it
	// short: a long deadline measures the deadline instead of the cluster.
	RequestTimeout time.Duration
	// MaxRun stops the writer on its own after this long (DefaultMaxRun).
	MaxRun time.Duration
	Logger logr.Logger
}

func (o WriterOptions) withDefaults() WriterOptions {
	if o.Run == "" {
		o.Run = strconv.FormatInt(time.Now().UnixNano(), 36)
	}
	if o.Rate <= 0 {
		o.Rate = DefaultWriteRate
	}
	instrumentDefaults(&o.RequestTimeout, &o.MaxRun, &o.Logger)
	return o
}

// AckedWrite is a Put the cluster acknowledged.
type AckedWrite struct {
	Seq   int64     `json:"seq"`
	Key   string    `json:"key"`
	Value string    `json:"value"`
	At    time.Time `json:"at"`
}

// FailedAttempt is one Put on one member that did not succeed.
type FailedAttempt struct {
	At     time.Time  `json:"at"`
	Seq    int64      `json:"seq"`
	Member string     `json:"member,omitempty"`
	Class  ErrorClass `json:"class"`
	Error  string     `json:"error"`
}

// LatencySample is one acknowledged write: when it was acknowledged and how long the client
// waited for it from its first attempt, retries on other members included.
type LatencySample struct {
	At        time.Time `json:"at"`
	LatencyMs float64   `json:"latencyMs"`
	Attempts  int       `json:"attempts"`
	Member    string    `json:"member"`
}

// WriteResult is what a Writer measured.
type WriteResult struct {
	Run string `json:"run"`
	// Prefix holds every key of the run: Prefix + zero-padded sequence number.
	Prefix  string    `json:"prefix"`
	Started time.Time `json:"started"`
	Stopped time.Time `json:"stopped"`

	AckedWrites int `json:"ackedWrites"`
	// FailedWrites counts failed attempts; one write may fail on several members before it is
	// acknowledged.
	FailedWrites    int                `json:"failedWrites"`
	FailuresByClass map[ErrorClass]int `json:"failuresByClass,omitempty"`
	// PendingSeq is the write still unacknowledged when the writer stopped (0 if none). It may
	// or may not have been applied, so it is not audited.
	PendingSeq int64 `json:"pendingSeq,omitempty"`

	// LongestGap is the longest time between two successive acknowledgements; when the writer
	// stopped while failing, the time from the last acknowledgement to the stop counts too.
	// Healthy, it is about 1/Rate.
	LongestGapMs    int64     `json:"longestGapMs"`
	LongestGapStart time.Time `json:"longestGapStart,omitzero"`
	LongestGapEnd   time.Time `json:"longestGapEnd,omitzero"`

	Acked     []AckedWrite    `json:"acked,omitempty"`
	Failures  []FailedAttempt `json:"failures,omitempty"`
	Latencies []LatencySample `json:"latencies,omitempty"`
	// Puts is the writer's part of the history the linearizability check reads: one per key
	// written, acknowledged or not (see PutOp). Not capped, like Acked.
	Puts []PutOp `json:"puts,omitempty"`
}

// Writer puts sequential keys at a steady rate. Each sequence number has exactly one value, so
// retrying a write on another member can never leave two different values for one key.
type Writer struct {
	endpoints EndpointsFunc
	opts      WriterOptions
	conns     *memberConns

	res     WriteResult
	lastAck time.Time
	// failingSince is the first failure after the last acknowledgement, zero while succeeding.
	failingSince time.Time
	// current is the sequence number being written or, between two writes, the next one: the
	// reader reads its key as "the Put in flight".
	current int64
	// hold is non-nil while the writer is paused (closed by Resume); parked is closed once the
	// loop has stopped at it, with no put in flight.
	hold, parked chan struct{}
	background
}

// NewWriter prepares a writer; Start begins writing.
func NewWriter(endpoints EndpointsFunc, creds conductortls.ClientMaterial, o WriterOptions) *Writer {
	o = o.withDefaults()
	w := &Writer{
		endpoints: endpoints,
		opts:      o,
		conns:     newMemberConns(creds),
		res: WriteResult{
			Run:             o.Run,
			Prefix:          KeyPrefix + o.Run + "/",
			FailuresByClass: map[ErrorClass]int{},
		},
	}
	w.setUp("writer", o.MaxRun, w.conns.close)
	return w
}

// Start begins writing in the background until Stop, ctx ends or MaxRun passes.
func (w *Writer) Start(ctx context.Context) error { return w.start(ctx, w.run) }

// Stop ends the writer and returns what it measured. It waits for the in-flight request (at
// most RequestTimeout) unless ctx ends first.
func (w *Writer) Stop(ctx context.Context) WriteResult {
	w.halt(ctx)
	return w.Snapshot()
}

// Snapshot is what the writer measured so far; the gap of an ongoing outage is included.
func (w *Writer) Snapshot() WriteResult {
	w.mu.Lock()
	defer w.mu.Unlock()
	res := w.res
	res.Started, res.Stopped = w.started, w.stopped
	end := w.until()
	if !w.failingSince.IsZero() {
		from := w.lastAck
		if from.IsZero() {
			from = res.Started
		}
		if gap := end.Sub(from); gap.Milliseconds() > res.LongestGapMs {
			res.LongestGapMs, res.LongestGapStart, res.LongestGapEnd = gap.Milliseconds(), from, end
		}
	}
	res.FailuresByClass = make(map[ErrorClass]int, len(w.res.FailuresByClass))
	for k, v := range w.res.FailuresByClass {
		res.FailuresByClass[k] = v
	}
	res.Acked = append([]AckedWrite(nil), w.res.Acked...)
	res.Failures = append([]FailedAttempt(nil), w.res.Failures...)
	res.Latencies = append([]LatencySample(nil), w.res.Latencies...)
	res.Puts = append([]PutOp(nil), w.res.Puts...)
	return res
}

// Gaps lists the stretches longer than threshold without an acknowledgement, in time order:
// between successive acknowledgements, and from the last one to the stop when the writer was
// failing then. At a steady rate every gap is about 1/Rate, so a threshold of a few intervals
// leaves only the outages.
func (r WriteResult) Gaps(threshold time.Duration) []Interval {
	var gaps []Interval
	add := func(from, to time.Time) {
		if d := to.Sub(from); d > threshold {
			gaps = append(gaps, Interval{Start: from, End: to, Ms: d.Milliseconds()})
		}
	}
	for i := 1; i < len(r.Acked); i++ {
		add(r.Acked[i-1].At, r.Acked[i].At)
	}
	if r.PendingSeq != 0 && !r.Stopped.IsZero() {
		from := r.Started
		if n := len(r.Acked); n > 0 {
			from = r.Acked[n-1].At
		}
		add(from, r.Stopped)
	}
	return gaps
}

// Pause holds the writer's next put until Resume and returns once no put is in flight (or ctx
// ends): a scenario that needs every member to have applied the same index makes the writes
// stop. The pause shows in the figures as a write gap.
func (w *Writer) Pause(ctx context.Context) error {
	w.mu.Lock()
	if w.hold == nil {
		w.hold, w.parked = make(chan struct{}), make(chan struct{})
	}
	parked := w.parked
	w.mu.Unlock()
	select {
	case <-parked:
		return nil
	case <-w.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("pausing the writer: %w", ctx.Err())
	}
}

// Resume lets a paused writer go on at its rate.
func (w *Writer) Resume() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.hold != nil {
		close(w.hold)
		w.hold, w.parked = nil, nil
	}
}

// waitWhilePaused parks the loop while the writer is paused; false once ctx ends.
func (w *Writer) waitWhilePaused(ctx context.Context) bool {
	w.mu.Lock()
	hold, parked := w.hold, w.parked
	w.mu.Unlock()
	if hold == nil {
		return true
	}
	close(parked)
	select {
	case <-hold:
		return true
	case <-ctx.Done():
		return false
	}
}

func (w *Writer) run(ctx context.Context) {
	// sticky is the member that acknowledged last; writes go there first so a healthy run
	// does not hop between members.
	sticky := ""
	seq := int64(0)
	paced(ctx, time.Duration(float64(time.Second)/w.opts.Rate), func() bool {
		if !w.waitWhilePaused(ctx) {
			return false
		}
		seq++
		member, ok := w.write(ctx, seq, sticky)
		w.mu.Lock()
		defer w.mu.Unlock()
		if !ok {
			w.res.PendingSeq = seq
			return false
		}
		w.current = seq + 1
		sticky = member
		return true
	})
}

// sentPut is what the history needs of a key's attempts: those that may have reached a member.
type sentPut struct {
	first    time.Time
	attempts int
	member   string
}

func (s *sentPut) sending(member string) {
	if s.attempts == 0 {
		s.first = time.Now()
	}
	s.attempts++
	s.member = member
}

// write puts key seq until a member acknowledges it or ctx ends; it returns the member that
// acknowledged. A key the writer gives up on goes into the history as failed, or unknown when
// an attempt may have reached a member.
func (w *Writer) write(ctx context.Context, seq int64, sticky string) (member string, ok bool) {
	key, value := w.key(seq), w.value(seq)
	first := time.Now()
	attempts := 0
	var sent sentPut
	w.mu.Lock()
	w.current = seq
	w.mu.Unlock()
	defer func() {
		if !ok {
			w.recordGivenUp(key, value, sent)
		}
	}()
	for ctx.Err() == nil {
		conns, dialFailures := w.conns.sync(w.endpoints())
		for _, f := range dialFailures {
			attempts++
			w.recordFailure(seq, f.ep.Name, ClassDial, f.err)
		}
		if len(conns) == 0 && len(dialFailures) == 0 {
			attempts++
			w.recordFailure(seq, "", ClassNoEndpoints, errors.New("no endpoints"))
		}
		for _, c := range stickyFirst(conns, sticky) {
			attempts++
			// Counted before the call: a Put cut short by a deadline or a broken connection
			// may still be applied.
			sent.sending(c.ep.Name)
			err := w.put(ctx, c, key, value)
			if err == nil {
				w.recordAck(seq, key, value, c.ep.Name, first, attempts, sent)
				return c.ep.Name, true
			}
			if ctx.Err() != nil {
				return "", false
			}
			w.recordFailure(seq, c.ep.Name, classify(err), err)
		}
		if !sleepUntil(ctx, time.Now().Add(roundPause)) {
			return "", false
		}
	}
	return "", false
}

func (w *Writer) put(ctx context.Context, c *memberConn, key, value string) error {
	ctx, cancel := context.WithTimeout(ctx, w.opts.RequestTimeout)
	defer cancel()
	_, err := c.kv.Put(ctx, &pb.PutRequest{Key: []byte(key), Value: []byte(value)}, failFast)
	if err != nil {
		return fmt.Errorf("put %s on member %s at %s: %w", key, c.ep.Name, c.ep.Address, err)
	}
	return nil
}

// key zero-pads the sequence number so the keys sort in write order.
func (w *Writer) key(seq int64) string { return fmt.Sprintf("%s%012d", w.res.Prefix, seq) }

func (w *Writer) value(seq int64) string { return fmt.Sprintf("%s#%d", w.opts.Run, seq) }

func (w *Writer) recordAck(seq int64, key, value, member string, first time.Time, attempts int, sent sentPut) {
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.res.Puts = append(w.res.Puts, PutOp{Key: key, Value: value, Call: sent.first, Return: now, Outcome: OutcomeOK,
		Member: member, Attempts: sent.attempts})
	from := w.lastAck
	if from.IsZero() && !w.failingSince.IsZero() {
		// Failing from the very start: the outage began when the writer did.
		from = w.started
	}
	if !from.IsZero() {
		if gap := now.Sub(from); gap.Milliseconds() > w.res.LongestGapMs || w.res.LongestGapEnd.IsZero() {
			w.res.LongestGapMs, w.res.LongestGapStart, w.res.LongestGapEnd = gap.Milliseconds(), from, now
		}
	}
	w.lastAck, w.failingSince = now, time.Time{}
	w.res.AckedWrites++
	// The audit needs every acknowledged key, so this list is not capped.
	w.res.Acked = append(w.res.Acked, AckedWrite{Seq: seq, Key: key, Value: value, At: now})
	if len(w.res.Latencies) < maxRecords {
		w.res.Latencies = append(w.res.Latencies, LatencySample{
			At:        now,
			LatencyMs: float64(now.Sub(first).Microseconds()) / 1000,
			Attempts:  attempts,
			Member:    member,
		})
	}
}

// recordGivenUp records the key the writer stopped on without an acknowledgement.
func (w *Writer) recordGivenUp(key, value string, sent sentPut) {
	op := PutOp{Key: key, Value: value, Outcome: OutcomeFailed, Call: sent.first, Member: sent.member, Attempts: sent.attempts}
	if sent.attempts > 0 {
		op.Outcome = OutcomeUnknown
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.res.Puts = append(w.res.Puts, op)
}

func (w *Writer) recordFailure(seq int64, member string, class ErrorClass, err error) {
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.failingSince.IsZero() {
		w.failingSince = now
	}
	w.res.FailedWrites++
	w.res.FailuresByClass[class]++
	if len(w.res.Failures) < maxRecords {
		w.res.Failures = append(w.res.Failures, FailedAttempt{At: now, Seq: seq, Member: member, Class: class, Error: err.Error()})
	}
	w.opts.Logger.V(1).Info("write failed", "seq", seq, "member", member, "class", class, "error", err)
}

// stickyFirst orders conns so the member named sticky comes first, the rest in their order.
func stickyFirst(conns []*memberConn, sticky string) []*memberConn {
	for i, c := range conns {
		if c.ep.Name == sticky && i > 0 {
			out := make([]*memberConn, 0, len(conns))
			out = append(out, c)
			out = append(out, conns[:i]...)
			return append(out, conns[i+1:]...)
		}
	}
	return conns
}

// sleepUntil waits until t and reports false if ctx ended first.
func sleepUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}
