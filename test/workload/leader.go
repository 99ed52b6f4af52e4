package workload

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/go-logr/logr"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	conductortls "github.com/etcd-conductor/etcd-conductor/tls"
)

const DefaultLeaderPollInterval = 100 * time.Millisecond

// LeaderOptions tunes a LeaderMonitor. Zero values take the defaults.
type LeaderOptions struct {
	// Interval is the time between the starts of two polling rounds (DefaultLeaderPollInterval).
	Interval time.Duration
	// RequestTimeout bounds one Status call (DefaultRequestTimeout).
	RequestTimeout time.Duration
	// MaxRun stops the monitor on its own after this long (DefaultMaxRun).
	MaxRun time.Duration
	Logger logr.Logger
}

func (o LeaderOptions) withDefaults() LeaderOptions {
	if o.Interval <= 0 {
		o.Interval = DefaultLeaderPollInterval
	}
	instrumentDefaults(&o.RequestTimeout, &o.MaxRun, &o.Logger)
	return o
}

// LeaderEpoch is a raft term and its leader, as first reported by some member.
type LeaderEpoch struct {
	At   time.Time `json:"at"`
	Term uint64    `json:"term"`
	// LeaderID is the leader's member ID in hex; Leader its name when a member with that ID
	// answered a poll.
	LeaderID   string `json:"leaderID"`
	Leader     string `json:"leader,omitempty"`
	ReportedBy string `json:"reportedBy"`
}

// LeaderObservation is a change in what one member says: its leader, its term, or whether it
// answered at all.
type LeaderObservation struct {
	At        time.Time  `json:"at"`
	Member    string     `json:"member"`
	Reachable bool       `json:"reachable"`
	LeaderID  string     `json:"leaderID,omitempty"`
	Leader    string     `json:"leader,omitempty"`
	Term      uint64     `json:"term,omitempty"`
	Class     ErrorClass `json:"class,omitempty"`
}

// LeaderResult is what a LeaderMonitor measured.
type LeaderResult struct {
	Started time.Time `json:"started"`
	Stopped time.Time `json:"stopped,omitzero"`
	Rounds  int       `json:"rounds"`

	// DistinctLeaders names every member seen as leader (hex ID when its name is unknown).
	DistinctLeaders []string `json:"distinctLeaders"`
	// LeaderChanges counts successive terms, in term order, whose leaders differ. A term won
	// again by the same member is no change.
	LeaderChanges int `json:"leaderChanges"`
	// TermIncrements is the highest term seen minus the lowest.
	TermIncrements uint64 `json:"termIncrements"`
	FirstTerm      uint64 `json:"firstTerm"`
	LastTerm       uint64 `json:"lastTerm"`

	Epochs       []LeaderEpoch       `json:"epochs,omitempty"`
	Observations []LeaderObservation `json:"observations,omitempty"`
}

// LeaderMonitor polls every member's Status and records the raft terms and leaders it sees.
type LeaderMonitor struct {
	endpoints EndpointsFunc
	opts      LeaderOptions
	conns     *memberConns

	res     LeaderResult
	epochs  map[uint64]*LeaderEpoch // term → first report of its leader
	names   map[uint64]string       // member ID → name, learnt from each member's own answer
	last    map[string]LeaderObservation
	minTerm uint64
	maxTerm uint64
	background
}

// NewLeaderMonitor prepares a monitor; Start begins polling.
func NewLeaderMonitor(endpoints EndpointsFunc, creds conductortls.ClientMaterial, o LeaderOptions) *LeaderMonitor {
	m := &LeaderMonitor{
		endpoints: endpoints,
		opts:      o.withDefaults(),
		conns:     newMemberConns(creds),
		epochs:    map[uint64]*LeaderEpoch{},
		names:     map[uint64]string{},
		last:      map[string]LeaderObservation{},
	}
	m.setUp("leader monitor", m.opts.MaxRun, m.conns.close)
	return m
}

// Start begins polling in the background until Stop, ctx ends or MaxRun passes.
func (m *LeaderMonitor) Start(ctx context.Context) error {
	return m.start(ctx, func(ctx context.Context) {
		paced(ctx, m.opts.Interval, func() bool { m.round(ctx); return true })
	})
}

// Stop ends polling and returns the result.
func (m *LeaderMonitor) Stop(ctx context.Context) LeaderResult {
	m.halt(ctx)
	return m.Snapshot()
}

// Snapshot is what the monitor measured so far.
func (m *LeaderMonitor) Snapshot() LeaderResult {
	m.mu.Lock()
	defer m.mu.Unlock()
	res := m.res
	res.Started, res.Stopped = m.started, m.stopped
	res.Observations = append([]LeaderObservation(nil), m.res.Observations...)
	for i := range res.Observations {
		if res.Observations[i].Leader == "" && res.Observations[i].LeaderID != "" {
			res.Observations[i].Leader = m.nameOfHex(res.Observations[i].LeaderID)
		}
	}
	terms := make([]uint64, 0, len(m.epochs))
	for t := range m.epochs {
		terms = append(terms, t)
	}
	sort.Slice(terms, func(i, j int) bool { return terms[i] < terms[j] })
	leaders := map[string]bool{}
	res.DistinctLeaders = []string{}
	res.Epochs = make([]LeaderEpoch, 0, len(terms))
	for i, t := range terms {
		e := *m.epochs[t]
		e.Leader = m.nameOfHex(e.LeaderID)
		res.Epochs = append(res.Epochs, e)
		if i > 0 && res.Epochs[i-1].LeaderID != e.LeaderID {
			res.LeaderChanges++
		}
		if !leaders[e.Leader] {
			leaders[e.Leader] = true
			res.DistinctLeaders = append(res.DistinctLeaders, e.Leader)
		}
	}
	res.FirstTerm, res.LastTerm = m.minTerm, m.maxTerm
	res.TermIncrements = m.maxTerm - m.minTerm
	return res
}

// nameOfHex is the member name for a hex member ID, or the ID itself when no member with that
// ID answered yet.
func (m *LeaderMonitor) nameOfHex(id string) string {
	n, err := strconv.ParseUint(id, 16, 64)
	if err == nil {
		if name, ok := m.names[n]; ok {
			return name
		}
	}
	return id
}

func (m *LeaderMonitor) round(ctx context.Context) {
	conns, failed := m.conns.sync(m.endpoints())
	at := time.Now()
	var wg sync.WaitGroup
	answers := make([]*pb.StatusResponse, len(conns))
	errs := make([]error, len(conns))
	for i, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sctx, cancel := context.WithTimeout(ctx, m.opts.RequestTimeout)
			defer cancel()
			answers[i], errs[i] = c.maint.Status(sctx, &pb.StatusRequest{}, failFast)
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		return
	}

	m.mu.Lock()
	defer m.mu.Unlock()
	m.res.Rounds++
	for _, f := range failed {
		m.observe(LeaderObservation{At: at, Member: f.ep.Name, Class: ClassDial})
	}
	for i, c := range conns {
		if errs[i] != nil {
			m.observe(LeaderObservation{At: at, Member: c.ep.Name, Class: classify(errs[i])})
			continue
		}
		s := answers[i]
		self := s.GetHeader().GetMemberId()
		if self != 0 {
			m.names[self] = c.ep.Name
		}
		term, leader := s.GetRaftTerm(), s.GetLeader()
		o := LeaderObservation{At: at, Member: c.ep.Name, Reachable: true, Term: term}
		if leader != 0 {
			o.LeaderID = hexID(leader)
		}
		m.observe(o)
		if term != 0 {
			if m.minTerm == 0 || term < m.minTerm {
				m.minTerm = term
			}
			m.maxTerm = max(m.maxTerm, term)
		}
		if leader != 0 && term != 0 && m.epochs[term] == nil {
			m.epochs[term] = &LeaderEpoch{At: at, Term: term, LeaderID: hexID(leader), ReportedBy: c.ep.Name}
			m.opts.Logger.Info("leader observed", "term", term, "leader", hexID(leader), "reportedBy", c.ep.Name)
		}
	}
}

// observe records o when it differs from the member's previous observation.
func (m *LeaderMonitor) observe(o LeaderObservation) {
	prev, ok := m.last[o.Member]
	if ok && prev.Reachable == o.Reachable && prev.LeaderID == o.LeaderID && prev.Term == o.Term && prev.Class == o.Class {
		return
	}
	m.last[o.Member] = o
	if len(m.res.Observations) < maxRecords {
		m.res.Observations = append(m.res.Observations, o)
	}
}

func hexID(id uint64) string { return fmt.Sprintf("%x", id) }
