package workload

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/go-logr/logr"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	conductortls "github.com/etcd-conductor/etcd-conductor/tls"
)

// DefaultReadRate is how many reads a second the reader makes through each member: enough for
// every key kind to be read through every member several times a second, light next to the
// writer's 40-50 Puts a second on a 2-core machine.
const DefaultReadRate = 4.0

// ReaderOptions tunes a Reader. Zero values take the defaults.
type ReaderOptions struct {
	// Rate is the number of reads per second through each member (DefaultReadRate): a round
	// reads once through every member, one after the other, Rate rounds a second. A round that
	// runs late (a member timing out) is not made up in a burst.
	Rate float64
	// RequestTimeout is the deadline of one Get (DefaultRequestTimeout). A Get past it is
	// dropped from the history: it says nothing.
	RequestTimeout time.Duration
	// MaxRun stops the reader on its own after this long (DefaultMaxRun).
	MaxRun time.Duration
	Logger logr.Logger
}

func (o ReaderOptions) withDefaults() ReaderOptions {
	if o.Rate <= 0 {
		o.Rate = DefaultReadRate
	}
	instrumentDefaults(&o.RequestTimeout, &o.MaxRun, &o.Logger)
	return o
}

// ReadResult is what a Reader measured.
type ReadResult struct {
	Started time.Time `json:"started"`
	Stopped time.Time `json:"stopped,omitzero"`
	// Answered counts the Gets a member answered; FailedReads those that failed, by class.
	Answered        int                `json:"answered"`
	FailedReads     int                `json:"failedReads"`
	FailuresByClass map[ErrorClass]int `json:"failuresByClass,omitempty"`
	// Reads is the reader's part of the history (the first maxRecords answered Gets).
	Reads []ReadOp `json:"reads,omitempty"`
}

// readKind is which of the writer's keys a Get reads.
type readKind int

const (
	// readLastAcked: a Put acknowledged before the Get was sent must be seen (a stale read, a
	// lost write).
	readLastAcked readKind = iota
	// readInFlight: the key being written, or the next one between two writes. Seen before its
	// Put was sent would be a read of the future.
	readInFlight
	// readOlder: any key acknowledged earlier in the run, chosen at random, so that a rollback
	// of old writes shows too.
	readOlder
	numReadKinds
)

// Reader makes linearizable Gets of the keys a Writer is writing through every member in turn,
// recording each Get's call and return times and what it returned, for the linearizability
// check. It shares the writer's members (the same EndpointsFunc) but not its connections.
type Reader struct {
	endpoints EndpointsFunc
	writer    *Writer
	opts      ReaderOptions
	conns     *memberConns

	res ReadResult
	background
}

// NewReader prepares a reader of w's keys; Start begins reading.
func NewReader(endpoints EndpointsFunc, creds conductortls.ClientMaterial, w *Writer, o ReaderOptions) *Reader {
	r := &Reader{
		endpoints: endpoints,
		writer:    w,
		opts:      o.withDefaults(),
		conns:     newMemberConns(creds),
		res:       ReadResult{FailuresByClass: map[ErrorClass]int{}},
	}
	r.setUp("reader", r.opts.MaxRun, r.conns.close)
	return r
}

// Start begins reading in the background until Stop, ctx ends or MaxRun passes.
func (r *Reader) Start(ctx context.Context) error { return r.start(ctx, r.run) }

// Stop ends the reader and returns what it measured. It waits for the Get in flight (at most
// RequestTimeout) unless ctx ends first.
func (r *Reader) Stop(ctx context.Context) ReadResult {
	r.halt(ctx)
	return r.Snapshot()
}

// Snapshot is what the reader measured so far.
func (r *Reader) Snapshot() ReadResult {
	r.mu.Lock()
	defer r.mu.Unlock()
	res := r.res
	res.Started, res.Stopped = r.started, r.stopped
	res.FailuresByClass = make(map[ErrorClass]int, len(r.res.FailuresByClass))
	for k, v := range r.res.FailuresByClass {
		res.FailuresByClass[k] = v
	}
	res.Reads = append([]ReadOp(nil), r.res.Reads...)
	return res
}

func (r *Reader) run(ctx context.Context) {
	round := 0
	paced(ctx, time.Duration(float64(time.Second)/r.opts.Rate), func() bool {
		defer func() { round++ }()
		// A member that cannot be dialled is skipped: the writer counts those failures.
		conns, _ := r.conns.sync(r.endpoints())
		for i, c := range conns {
			// The kinds rotate over the members from round to round, so every member serves
			// every kind.
			key := r.writer.readTarget(readKind((round + i) % int(numReadKinds)))
			if key == "" {
				continue
			}
			r.read(ctx, c, key)
			if ctx.Err() != nil {
				return false
			}
		}
		return true
	})
}

// read makes one linearizable Get and records it; a failed one is only counted.
func (r *Reader) read(ctx context.Context, c *memberConn, key string) {
	rctx, cancel := context.WithTimeout(ctx, r.opts.RequestTimeout)
	defer cancel()
	call := time.Now()
	// Serializable stays false: the member confirms with the leader that it is up to date
	// (ReadIndex) before answering, which is what makes the read linearizable.
	resp, err := c.kv.Range(rctx, &pb.RangeRequest{Key: []byte(key)}, failFast)
	ret := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		if ctx.Err() != nil {
			return // stopped, not failed
		}
		class := classify(err)
		r.res.FailedReads++
		r.res.FailuresByClass[class]++
		r.opts.Logger.V(1).Info("read failed", "key", key, "member", c.ep.Name, "class", class,
			"error", fmt.Errorf("get %s on member %s at %s: %w", key, c.ep.Name, c.ep.Address, err))
		return
	}
	r.res.Answered++
	if len(r.res.Reads) >= maxRecords {
		return
	}
	op := ReadOp{Key: key, Member: c.ep.Name, Call: call, Return: ret}
	if kvs := resp.GetKvs(); len(kvs) > 0 {
		op.Found, op.Value = true, string(kvs[0].GetValue())
	}
	r.res.Reads = append(r.res.Reads, op)
}

// readTarget is the key a Get of kind reads now, "" while there is none yet.
func (w *Writer) readTarget(kind readKind) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	acked := w.res.Acked
	switch kind {
	case readLastAcked:
		if len(acked) > 0 {
			return acked[len(acked)-1].Key
		}
	case readInFlight:
		if w.current > 0 {
			return w.key(w.current)
		}
	case readOlder:
		if len(acked) > 0 {
			return acked[rand.IntN(len(acked))].Key
		}
	}
	return ""
}
