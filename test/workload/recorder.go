package workload

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"

	conductortls "github.com/etcd-conductor/etcd-conductor/tls"
)

const (
	// DefaultAuditTimeout bounds the audit at Stop, which waits for the cluster to serve a
	// linearizable read again.
	DefaultAuditTimeout = 60 * time.Second
	// DefaultGapThreshold is five write intervals at the default rate: shorter gaps are the
	// writer's own pacing and jitter, not an outage.
	DefaultGapThreshold = 100 * time.Millisecond
)

// RecorderOptions configures the instruments a Recorder runs.
type RecorderOptions struct {
	// Expected is the cluster's member count (required); it overrides Quorum.Expected.
	Expected int
	Writer   WriterOptions
	Reader   ReaderOptions
	Quorum   QuorumOptions
	Leader   LeaderOptions
	// Check tunes the linearizability check of the writer's and reader's history at Stop; keys
	// handed to Recorder.Exclude are added to Check.Exclude.
	Check CheckOptions
	// AuditTimeout bounds the audit at Stop (DefaultAuditTimeout); the Stop context may end
	// it sooner.
	AuditTimeout time.Duration
	// GapThreshold selects the write gaps listed in Report.WriteGaps (DefaultGapThreshold).
	GapThreshold time.Duration
	// AuditCreds, when set, is the material the audit at Stop reads with instead of the
	// instruments': for a run across which the members moved from plain HTTP to TLS.
	AuditCreds *conductortls.ClientMaterial
	Logger     logr.Logger
}

// Report is everything one recorded run measured. Durations are milliseconds.
type Report struct {
	Run        string    `json:"run"`
	Started    time.Time `json:"started"`
	Stopped    time.Time `json:"stopped"`
	DurationMs int64     `json:"durationMs"`
	Expected   int       `json:"expected"`

	// QuorumLossMs is proven by the members' own refusals; QuorumUnconfirmedMs is time without a
	// confirmed quorum because probes timed out on the client side (see QuorumResult).
	QuorumLossMs               int64 `json:"quorumLossMs"`
	LongestQuorumLossMs        int64 `json:"longestQuorumLossMs"`
	QuorumUnconfirmedMs        int64 `json:"quorumUnconfirmedMs"`
	LongestQuorumUnconfirmedMs int64 `json:"longestQuorumUnconfirmedMs"`
	ProbeTimeouts              int   `json:"probeTimeouts"`
	ProbeRefusals              int   `json:"probeRefusals"`
	// ProbeLeaderChangedRetries counts probes first answered "leader changed" and asked again.
	ProbeLeaderChangedRetries int `json:"probeLeaderChangedRetries"`

	LongestWriteGapMs    int64     `json:"longestWriteGapMs"`
	LongestWriteGapStart time.Time `json:"longestWriteGapStart,omitzero"`
	LongestWriteGapEnd   time.Time `json:"longestWriteGapEnd,omitzero"`
	FailedWrites         int       `json:"failedWrites"`
	// WriteTimeouts are failed attempts that ran into the client's deadline; WriteRefusals those
	// a member answered with an error (no leader, leader changed, stopped, unavailable, ...).
	// Attempts cut short by the stop are neither.
	WriteTimeouts int `json:"writeTimeouts"`
	WriteRefusals int `json:"writeRefusals"`
	AckedWrites   int `json:"ackedWrites"`
	// LostAckedWrites counts acknowledged keys the audit did not find with their value. It is
	// only meaningful when AuditError is empty.
	LostAckedWrites int      `json:"lostAckedWrites"`
	LostKeys        []string `json:"lostKeys,omitempty"`
	AuditError      string   `json:"auditError,omitempty"`

	// Reads counts the reader's answered Gets, FailedReads those that failed (left out of the
	// history: they say nothing).
	Reads       int `json:"reads"`
	FailedReads int `json:"failedReads"`
	// Linearizability is the check of every Put and answered Get; LinearizabilityError is set
	// when the history is illegal or the check did not finish.
	Linearizability      LinearizabilityResult `json:"linearizability"`
	LinearizabilityError string                `json:"linearizabilityError,omitempty"`

	LeaderChanges   int      `json:"leaderChanges"`
	TermIncrements  uint64   `json:"termIncrements"`
	DistinctLeaders []string `json:"distinctLeaders"`

	FailuresByClass map[ErrorClass]int `json:"failuresByClass,omitempty"`
	QuorumLosses    []Interval         `json:"quorumLosses,omitempty"`
	// QuorumUnconfirmed are the intervals counted in QuorumUnconfirmedMs.
	QuorumUnconfirmed []Interval `json:"quorumUnconfirmed,omitempty"`
	// WriteGaps are the gaps between acknowledgements longer than the GapThreshold.
	WriteGaps      []Interval            `json:"writeGaps,omitempty"`
	WriteLatencies []LatencySample       `json:"writeLatencies,omitempty"`
	WriteFailures  []FailedAttempt       `json:"writeFailures,omitempty"`
	Participation  []ParticipationSample `json:"participation,omitempty"`
	Participating  []CountSample         `json:"participating,omitempty"`
	LeaderEpochs   []LeaderEpoch         `json:"leaderEpochs,omitempty"`
	LeaderTimeline []LeaderObservation   `json:"leaderTimeline,omitempty"`
}

// Summary is the report on one line for humans.
func (r Report) Summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "run %s (%s): acked=%d failed=%d (timeouts %d, refusals %d) lost=%d longestWriteGap=%dms quorumLoss=%dms (longest %dms) quorumUnconfirmedByTimeouts=%dms probeTimeouts=%d probeRefusals=%d probeLeaderChangedRetries=%d leaderChanges=%d termIncrements=%d",
		r.Run, (time.Duration(r.DurationMs) * time.Millisecond).String(), r.AckedWrites, r.FailedWrites, r.WriteTimeouts, r.WriteRefusals,
		r.LostAckedWrites, r.LongestWriteGapMs, r.QuorumLossMs, r.LongestQuorumLossMs, r.QuorumUnconfirmedMs,
		r.ProbeTimeouts, r.ProbeRefusals, r.ProbeLeaderChangedRetries, r.LeaderChanges, r.TermIncrements)
	if len(r.FailuresByClass) > 0 {
		classes := make([]string, 0, len(r.FailuresByClass))
		for c, n := range r.FailuresByClass {
			classes = append(classes, fmt.Sprintf("%s:%d", c, n))
		}
		sort.Strings(classes)
		fmt.Fprintf(&b, " failures[%s]", strings.Join(classes, " "))
	}
	fmt.Fprintf(&b, " reads=%d failedReads=%d %s", r.Reads, r.FailedReads, r.Linearizability.Summary())
	if r.AuditError != "" {
		fmt.Fprintf(&b, " AUDIT FAILED: %s", truncate(r.AuditError, 200))
	}
	if r.LinearizabilityError != "" {
		fmt.Fprintf(&b, " NOT LINEARIZABLE: %s", truncate(r.LinearizabilityError, 300))
	}
	return b.String()
}

// Recorder runs the writer, the reader, the quorum monitor and the leader monitor together and,
// when stopped, audits the acknowledged writes and checks that the history of Puts and Gets is
// linearizable.
type Recorder struct {
	endpoints EndpointsFunc
	creds     conductortls.ClientMaterial
	opts      RecorderOptions

	writer *Writer
	reader *Reader
	quorum *QuorumMonitor
	leader *LeaderMonitor

	mu      sync.Mutex
	started bool
	stopped bool
	// excluded are keys a scenario loses by design (Exclude).
	excluded map[string]bool
}

// NewRecorder prepares the instruments; Start starts them.
func NewRecorder(endpoints EndpointsFunc, creds conductortls.ClientMaterial, o RecorderOptions) (*Recorder, error) {
	if endpoints == nil {
		return nil, errors.New("recorder: endpoints function is nil")
	}
	if o.AuditTimeout <= 0 {
		o.AuditTimeout = DefaultAuditTimeout
	}
	if o.GapThreshold <= 0 {
		o.GapThreshold = DefaultGapThreshold
	}
	if o.Logger.GetSink() == nil {
		o.Logger = logr.Discard()
	}
	o.Quorum.Expected = o.Expected
	if o.Writer.Logger.GetSink() == nil {
		o.Writer.Logger = o.Logger.WithName("writer")
	}
	if o.Quorum.Logger.GetSink() == nil {
		o.Quorum.Logger = o.Logger.WithName("quorum")
	}
	if o.Leader.Logger.GetSink() == nil {
		o.Leader.Logger = o.Logger.WithName("leader")
	}
	if o.Reader.Logger.GetSink() == nil {
		o.Reader.Logger = o.Logger.WithName("reader")
	}
	if o.Reader.RequestTimeout <= 0 {
		o.Reader.RequestTimeout = o.Writer.RequestTimeout
	}
	quorum, err := NewQuorumMonitor(endpoints, creds, o.Quorum)
	if err != nil {
		return nil, fmt.Errorf("recorder: %w", err)
	}
	writer := NewWriter(endpoints, creds, o.Writer)
	return &Recorder{
		endpoints: endpoints,
		creds:     creds,
		opts:      o,
		writer:    writer,
		reader:    NewReader(endpoints, creds, writer, o.Reader),
		quorum:    quorum,
		leader:    NewLeaderMonitor(endpoints, creds, o.Leader),
		excluded:  map[string]bool{},
	}, nil
}

// Start starts every instrument. The monitors start first so the writer's first write is
// already observed; the reader last, as it reads the writer's keys.
func (r *Recorder) Start(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.started {
		return errors.New("recorder already started")
	}
	r.started = true
	for _, start := range []func(context.Context) error{r.quorum.Start, r.leader.Start, r.writer.Start, r.reader.Start} {
		if err := start(ctx); err != nil {
			return fmt.Errorf("recorder: %w", err)
		}
	}
	return nil
}

// Writer, Reader, Quorum and Leader give access to the running instruments, e.g. to wait on a
// Snapshot in a scenario.
func (r *Recorder) Writer() *Writer               { return r.writer }
func (r *Recorder) Reader() *Reader               { return r.reader }
func (r *Recorder) Quorum() *QuorumMonitor        { return r.quorum }
func (r *Recorder) LeaderMonitor() *LeaderMonitor { return r.leader }

// Exclude leaves keys out of the linearizability check at Stop: writes the scenario loses by
// design, such as those a restore from backup loses after the last delta snapshot (the RPO).
// Only those: an excluded key's rollback is no longer seen.
func (r *Recorder) Exclude(keys ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, k := range keys {
		r.excluded[k] = true
	}
}

// Stop stops the reader and the writer, then the monitors, then audits the acknowledged writes
// against the current endpoints and checks the history of Puts and Gets for linearizability.
// The report is returned even when the audit or the check fails; err says why. Every scenario
// that runs a Recorder fails on err, so an illegal history fails them all.
func (r *Recorder) Stop(ctx context.Context) (Report, error) {
	r.mu.Lock()
	if r.stopped {
		r.mu.Unlock()
		return Report{}, errors.New("recorder already stopped")
	}
	r.stopped = true
	r.mu.Unlock()

	rd := r.reader.Stop(ctx)
	w := r.writer.Stop(ctx)
	q := r.quorum.Stop(ctx)
	l := r.leader.Stop(ctx)
	rep := buildReport(r.opts.Expected, w, q, l)
	rep.WriteGaps = w.Gaps(r.opts.GapThreshold)
	rep.Reads, rep.FailedReads = rd.Answered, rd.FailedReads

	var errs []error
	actx, cancel := context.WithTimeout(ctx, r.opts.AuditTimeout)
	defer cancel()
	auditCreds := r.creds
	if r.opts.AuditCreds != nil {
		auditCreds = *r.opts.AuditCreds
	}
	lost, err := VerifyAcknowledged(actx, r.endpoints(), auditCreds, w)
	if err != nil {
		rep.AuditError = err.Error()
		r.opts.Logger.Info("audit failed", "run", rep.Run, "error", err)
		errs = append(errs, err)
	} else {
		rep.LostAckedWrites, rep.LostKeys = len(lost), lost
	}
	if err := r.checkHistory(&rep, History{Puts: w.Puts, Reads: rd.Reads}); err != nil {
		r.opts.Logger.Info("history not linearizable", "run", rep.Run, "error", err)
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return rep, fmt.Errorf("recorder: %w", errors.Join(errs...))
	}
	r.opts.Logger.Info("run recorded", "summary", rep.Summary())
	return rep, nil
}

// checkHistory is the linearizability check at Stop: it fills the report's result and returns
// the check's error (illegal or unknown), with the excluded keys left out.
func (r *Recorder) checkHistory(rep *Report, h History) error {
	o := r.opts.Check
	r.mu.Lock()
	o.Exclude = make(map[string]bool, len(r.opts.Check.Exclude)+len(r.excluded))
	for _, set := range []map[string]bool{r.opts.Check.Exclude, r.excluded} {
		for k, v := range set {
			o.Exclude[k] = o.Exclude[k] || v
		}
	}
	r.mu.Unlock()
	res, err := CheckHistory(h, o)
	rep.Linearizability = res
	if err != nil {
		rep.LinearizabilityError = err.Error()
		return fmt.Errorf("linearizability: %w", err)
	}
	return nil
}

func buildReport(expected int, w WriteResult, q QuorumResult, l LeaderResult) Report {
	started := w.Started
	if started.IsZero() || (!q.Started.IsZero() && q.Started.Before(started)) {
		started = q.Started
	}
	stopped := w.Stopped
	for _, t := range []time.Time{q.Stopped, l.Stopped} {
		if t.After(stopped) {
			stopped = t
		}
	}
	var duration int64
	if !started.IsZero() && !stopped.IsZero() {
		duration = stopped.Sub(started).Milliseconds()
	}
	return Report{
		Run:                        w.Run,
		Started:                    started,
		Stopped:                    stopped,
		DurationMs:                 duration,
		Expected:                   expected,
		QuorumLossMs:               q.QuorumLossMs,
		LongestQuorumLossMs:        q.LongestQuorumLossMs,
		QuorumUnconfirmedMs:        q.UnconfirmedMs,
		ProbeTimeouts:              q.ProbeTimeouts,
		ProbeRefusals:              q.ProbeRefusals,
		ProbeLeaderChangedRetries:  q.LeaderChangedRetries,
		QuorumUnconfirmed:          q.Unconfirmed,
		WriteTimeouts:              w.FailuresByClass[ClassDeadline],
		WriteRefusals:              w.FailedWrites - w.FailuresByClass[ClassDeadline] - w.FailuresByClass[ClassCanceled],
		LongestWriteGapMs:          w.LongestGapMs,
		LongestWriteGapStart:       w.LongestGapStart,
		LongestWriteGapEnd:         w.LongestGapEnd,
		LongestQuorumUnconfirmedMs: q.LongestUnconfirmedMs,
		FailedWrites:               w.FailedWrites,
		AckedWrites:                w.AckedWrites,
		LeaderChanges:              l.LeaderChanges,
		TermIncrements:             l.TermIncrements,
		DistinctLeaders:            l.DistinctLeaders,
		FailuresByClass:            w.FailuresByClass,
		QuorumLosses:               q.Losses,
		WriteLatencies:             w.Latencies,
		WriteFailures:              w.Failures,
		Participation:              q.Participation,
		Participating:              q.Counts,
		LeaderEpochs:               l.Epochs,
		LeaderTimeline:             l.Observations,
	}
}
