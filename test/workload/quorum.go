package workload

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	"github.com/etcd-conductor/etcd-conductor/internal/decide/quorum"
	conductortls "github.com/etcd-conductor/etcd-conductor/tls"
)

// Probe is how the QuorumMonitor asks a member whether it can serve a linearizable read.
type Probe string

const (
	// ProbeLinearizableGet sends a linearizable Range over gRPC (mTLS) to the member.
	ProbeLinearizableGet Probe = "linearizable-get"
	// ProbeReadyz gets the member's /readyz and wants status 200 with body exactly "ok" (and
	// the trailing newline etcd writes).
	ProbeReadyz Probe = "readyz"

	DefaultPollInterval  = 75 * time.Millisecond
	DefaultProbeTimeout  = 200 * time.Millisecond
	DefaultReadyzPort    = "2381"
	maxReadyzBody        = 4096
	probeKey             = KeyPrefix + "probe"
	maxRecordedProbeBody = 200
	// leaderChangedBackoff is clientv3's wait between retries (its defaultBackoffWaitBetween).
	leaderChangedBackoff = 25 * time.Millisecond
)

// QuorumOptions tunes a QuorumMonitor. Zero values take the defaults, except Expected.
type QuorumOptions struct {
	// Expected is the member count of the cluster (its spec, not what is running now); a quorum
	// is Expected/2+1 of it. Required.
	Expected int
	// Probe defaults to ProbeLinearizableGet.
	Probe Probe
	// Interval is the time between the starts of two polling rounds (DefaultPollInterval). A
	// round lasts until every member answered or timed out.
	Interval time.Duration
	// ProbeTimeout bounds one probe (DefaultProbeTimeout).
	ProbeTimeout time.Duration
	// ReadyzURL maps a member to its /readyz URL; defaults to "http://<ip>:2381/readyz", the
	// plain-HTTP metrics listener. An https URL is fetched with the client TLS material and
	// the member's server name.
	ReadyzURL func(Endpoint) string
	// MaxRun stops the monitor on its own after this long (DefaultMaxRun).
	MaxRun time.Duration
	Logger logr.Logger
}

func (o QuorumOptions) withDefaults() (QuorumOptions, error) {
	if o.Expected <= 0 {
		return o, fmt.Errorf("quorum monitor: expected member count must be positive, got %d", o.Expected)
	}
	switch o.Probe {
	case "":
		o.Probe = ProbeLinearizableGet
	case ProbeLinearizableGet, ProbeReadyz:
	default:
		return o, fmt.Errorf("quorum monitor: unknown probe %q", o.Probe)
	}
	if o.Interval <= 0 {
		o.Interval = DefaultPollInterval
	}
	if o.ProbeTimeout <= 0 {
		o.ProbeTimeout = DefaultProbeTimeout
	}
	if o.ReadyzURL == nil {
		o.ReadyzURL = DefaultReadyzURL
	}
	instrumentDefaults(nil, &o.MaxRun, &o.Logger)
	return o, nil
}

// DefaultReadyzURL is the member's plain-HTTP metrics listener on its pod IP.
func DefaultReadyzURL(ep Endpoint) string {
	host, _, err := net.SplitHostPort(ep.Address)
	if err != nil {
		host = ep.Address
	}
	return "http://" + net.JoinHostPort(host, DefaultReadyzPort) + "/readyz"
}

// Interval is a span of time, e.g. one quorum loss.
type Interval struct {
	Start time.Time `json:"start"`
	// End is zero while the interval is still open.
	End time.Time `json:"end,omitzero"`
	Ms  int64     `json:"ms"`
	// MinParticipating is the fewest members that could serve during the interval.
	MinParticipating int `json:"minParticipating"`
}

// ParticipationSample is a member starting or stopping to serve linearizable reads. Only
// changes are recorded (and each member's first observation).
type ParticipationSample struct {
	At            time.Time  `json:"at"`
	Member        string     `json:"member"`
	Participating bool       `json:"participating"`
	Class         ErrorClass `json:"class,omitempty"`
	Error         string     `json:"error,omitempty"`
}

// CountSample is a change of the number of members that could serve.
type CountSample struct {
	At            time.Time `json:"at"`
	Participating int       `json:"participating"`
}

// QuorumResult is what a QuorumMonitor measured.
type QuorumResult struct {
	Expected int       `json:"expected"`
	Quorum   int       `json:"quorum"`
	Probe    Probe     `json:"probe"`
	Started  time.Time `json:"started"`
	Stopped  time.Time `json:"stopped,omitzero"`
	Rounds   int       `json:"rounds"`

	// QuorumLossMs counts the rounds in which the members' own answers prove there was no
	// quorum: fewer than a quorum answered "ok", and even counting every probe that timed out as
	// "ok" would not make one. A refusal is an answer: not ready, no leader, connection refused.
	QuorumLossMs        int64      `json:"quorumLossMs"`
	LongestQuorumLossMs int64      `json:"longestQuorumLossMs"`
	Losses              []Interval `json:"losses,omitempty"`
	// InLoss is true when the last round found no quorum.
	InLoss bool `json:"inLoss"`
	// UnconfirmedMs counts the rounds in which fewer than a quorum answered "ok" only because
	// probes ran into the client's own deadline: on a busy host that is the host, not
	// necessarily the cluster, so it is reported apart from QuorumLossMs, never dropped.
	UnconfirmedMs        int64      `json:"unconfirmedMs"`
	LongestUnconfirmedMs int64      `json:"longestUnconfirmedMs"`
	Unconfirmed          []Interval `json:"unconfirmed,omitempty"`
	InUnconfirmed        bool       `json:"inUnconfirmed"`
	// ProbeTimeouts and ProbeRefusals count failed probes by kind, over all rounds and members.
	ProbeTimeouts int `json:"probeTimeouts"`
	ProbeRefusals int `json:"probeRefusals"`
	// LeaderChangedRetries counts probes a member first answered with "leader changed" and that
	// were asked again at once; what the second answer said decides the round, as for a client.
	LeaderChangedRetries int `json:"leaderChangedRetries"`

	Participation []ParticipationSample `json:"participation,omitempty"`
	Counts        []CountSample         `json:"counts,omitempty"`
}

// QuorumMonitor polls every member for its ability to serve a linearizable read and records
// the intervals in which fewer than a quorum of the expected members could.
type QuorumMonitor struct {
	endpoints EndpointsFunc
	creds     conductortls.ClientMaterial
	opts      QuorumOptions
	conns     *memberConns
	http      *readyzClients

	res     QuorumResult
	members map[string]bool // last observation per member
	count   int             // participating members in the last round, -1 before the first
	background
}

// NewQuorumMonitor prepares a monitor; Start begins polling.
func NewQuorumMonitor(endpoints EndpointsFunc, creds conductortls.ClientMaterial, o QuorumOptions) (*QuorumMonitor, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	m := &QuorumMonitor{
		endpoints: endpoints,
		creds:     creds,
		opts:      o,
		conns:     newMemberConns(creds),
		http:      newReadyzClients(creds),
		res:       QuorumResult{Expected: o.Expected, Quorum: quorum.Of(o.Expected), Probe: o.Probe},
		members:   map[string]bool{},
		count:     -1,
	}
	m.setUp("quorum monitor", o.MaxRun, m.conns.close, m.http.close)
	return m, nil
}

// Start begins polling in the background until Stop, ctx ends or MaxRun passes.
func (m *QuorumMonitor) Start(ctx context.Context) error { return m.start(ctx, m.run) }

// Stop ends polling and returns the result; an ongoing loss is closed at the stop time.
func (m *QuorumMonitor) Stop(ctx context.Context) QuorumResult {
	m.halt(ctx)
	return m.Snapshot()
}

// Snapshot is what the monitor measured so far; an ongoing loss counts up to now.
func (m *QuorumMonitor) Snapshot() QuorumResult {
	m.mu.Lock()
	defer m.mu.Unlock()
	res := m.res
	res.Started, res.Stopped = m.started, m.stopped
	res.Losses = append([]Interval(nil), m.res.Losses...)
	res.Participation = append([]ParticipationSample(nil), m.res.Participation...)
	res.Counts = append([]CountSample(nil), m.res.Counts...)
	end := m.until()
	closeOpen(res.Losses, end, &res.QuorumLossMs, &res.LongestQuorumLossMs)
	res.Unconfirmed = append([]Interval(nil), m.res.Unconfirmed...)
	closeOpen(res.Unconfirmed, end, &res.UnconfirmedMs, &res.LongestUnconfirmedMs)
	return res
}

// closeOpen counts an interval still open at the end of spans up to end, into total and longest.
func closeOpen(spans []Interval, end time.Time, total, longest *int64) {
	if n := len(spans); n > 0 && spans[n-1].End.IsZero() {
		open := &spans[n-1]
		open.Ms = end.Sub(open.Start).Milliseconds()
		*total += open.Ms
		*longest = max(*longest, open.Ms)
	}
}

func (m *QuorumMonitor) run(ctx context.Context) {
	paced(ctx, m.opts.Interval, func() bool {
		at := time.Now()
		observed := m.round(ctx)
		if ctx.Err() != nil {
			// Probes cut short by the stop say nothing about the cluster.
			return false
		}
		m.record(at, observed)
		return true
	})
}

// probeResult is one member's answer in one round.
type probeResult struct {
	member string
	err    error
	// retriedAfter is the "leader changed" answer the probe was retried after, if any.
	retriedAfter error
}

// isLeaderChanged tells a request that leadership moving cut short (gRPC's "leader changed",
// or a /readyz whose linearizable read check failed with it) from any other failure.
func isLeaderChanged(err error) bool {
	if classify(err) == ClassLeaderChanged {
		return true
	}
	var notReady *notReadyError
	return errors.As(err, &notReady) && strings.Contains(notReady.body, rpctypes.ErrorDesc(rpctypes.ErrGRPCLeaderChanged))
}

// round probes every member concurrently and returns their answers.
func (m *QuorumMonitor) round(ctx context.Context) []probeResult {
	eps := m.endpoints()
	results := make([]probeResult, len(eps))
	var conns map[string]*memberConn
	var dialErrs map[string]error
	if m.opts.Probe == ProbeLinearizableGet {
		list, failed := m.conns.sync(eps)
		conns = make(map[string]*memberConn, len(list))
		for _, c := range list {
			conns[c.ep.Name] = c
		}
		dialErrs = map[string]error{}
		for _, f := range failed {
			dialErrs[f.ep.Name] = f.err
		}
	} else {
		m.http.sync(eps)
	}
	var wg sync.WaitGroup
	for i, ep := range eps {
		results[i].member = ep.Name
		wg.Add(1)
		go func() {
			defer wg.Done()
			pctx, cancel := context.WithTimeout(ctx, m.opts.ProbeTimeout)
			defer cancel()
			probe := func() error {
				switch {
				case m.opts.Probe == ProbeReadyz:
					return m.http.probe(pctx, ep, m.opts.ReadyzURL(ep))
				case conns[ep.Name] != nil:
					return probeLinearizable(pctx, conns[ep.Name])
				case dialErrs[ep.Name] != nil:
					return dialErrs[ep.Name]
				default:
					return fmt.Errorf("member %s: no connection", ep.Name)
				}
			}
			results[i].err = probe()
			// "Leader changed" means the request was in flight while leadership moved: etcd asks
			// the client to retry, clientv3 does so at once, and a kubelet needs two failed probes
			// in a row. The probe does as a client does, within the same deadline; the answer it
			// got first is counted (LeaderChangedRetries), never dropped.
			if isLeaderChanged(results[i].err) && sleepUntil(pctx, time.Now().Add(leaderChangedBackoff)) {
				results[i].retriedAfter = results[i].err
				results[i].err = probe()
			}
		}()
	}
	wg.Wait()
	return results
}

func probeLinearizable(ctx context.Context, c *memberConn) error {
	_, err := c.kv.Range(ctx, &pb.RangeRequest{Key: []byte(probeKey), Limit: 1, CountOnly: true}, failFast)
	if err != nil {
		return fmt.Errorf("linearizable get on member %s at %s: %w", c.ep.Name, c.ep.Address, err)
	}
	return nil
}

// record folds one round into the result.
func (m *QuorumMonitor) record(at time.Time, observed []probeResult) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.res.Rounds++
	seen := make(map[string]bool, len(observed))
	count, timedOut := 0, 0
	for _, r := range observed {
		ok := r.err == nil
		seen[r.member] = true
		if r.retriedAfter != nil {
			m.res.LeaderChangedRetries++
			m.opts.Logger.V(1).Info("probe retried after leader changed", "member", r.member, "first", r.retriedAfter.Error(), "retryOK", ok)
		}
		switch {
		case ok:
			count++
		case classify(r.err) == ClassDeadline:
			timedOut++
			m.res.ProbeTimeouts++
		default:
			m.res.ProbeRefusals++
		}
		if last, known := m.members[r.member]; !known || last != ok {
			m.members[r.member] = ok
			s := ParticipationSample{At: at, Member: r.member, Participating: ok}
			if !ok {
				s.Class, s.Error = classify(r.err), truncate(r.err.Error(), maxRecordedProbeBody)
			}
			m.appendParticipation(s)
		}
	}
	// A member that vanished from the endpoints cannot serve.
	for name, last := range m.members {
		if !seen[name] && last {
			m.members[name] = false
			m.appendParticipation(ParticipationSample{At: at, Member: name, Participating: false, Class: ClassNoEndpoints, Error: "not among the endpoints"})
		}
	}
	if count != m.count && len(m.res.Counts) < maxRecords {
		m.res.Counts = append(m.res.Counts, CountSample{At: at, Participating: count})
	}
	m.count = count

	lost := count+timedOut < m.res.Quorum
	unconfirmed := !lost && count < m.res.Quorum
	if track(&m.res.Losses, &m.res.InLoss, &m.res.QuorumLossMs, &m.res.LongestQuorumLossMs, at, lost, count) {
		if lost {
			m.opts.Logger.Info("quorum lost", "participating", count, "timedOut", timedOut, "quorum", m.res.Quorum)
		} else {
			m.opts.Logger.Info("quorum regained", "participating", count, "quorum", m.res.Quorum)
		}
	}
	track(&m.res.Unconfirmed, &m.res.InUnconfirmed, &m.res.UnconfirmedMs, &m.res.LongestUnconfirmedMs, at, unconfirmed, count)
}

// track folds one round's verdict (in: the round is inside such an interval) into spans and
// reports whether an interval opened or closed.
func track(spans *[]Interval, inside *bool, total, longest *int64, at time.Time, in bool, count int) bool {
	n := len(*spans)
	defer func() { *inside = in }()
	switch {
	case in && !*inside:
		*spans = append(*spans, Interval{Start: at, MinParticipating: count})
		return true
	case in:
		(*spans)[n-1].MinParticipating = min((*spans)[n-1].MinParticipating, count)
	case *inside:
		l := &(*spans)[n-1]
		l.End = at
		l.Ms = at.Sub(l.Start).Milliseconds()
		*total += l.Ms
		*longest = max(*longest, l.Ms)
		return true
	}
	return false
}

func (m *QuorumMonitor) appendParticipation(s ParticipationSample) {
	if len(m.res.Participation) < maxRecords {
		m.res.Participation = append(m.res.Participation, s)
	}
}

// ProbeReadyzOnce asks one member's /readyz at DefaultReadyzURL, the check its readiness probe
// makes, on a connection of its own; nil means it answered "ok".
func ProbeReadyzOnce(ctx context.Context, creds conductortls.ClientMaterial, ep Endpoint) error {
	clients := newReadyzClients(creds)
	defer clients.close()
	return clients.probe(ctx, ep, DefaultReadyzURL(ep))
}

// readyzClients keeps one HTTP client per member, so probes reuse their connections.
type readyzClients struct {
	creds conductortls.ClientMaterial

	mu      sync.Mutex
	clients map[string]readyzClient
}

type readyzClient struct {
	ep     Endpoint
	client *http.Client
	err    error
}

func newReadyzClients(creds conductortls.ClientMaterial) *readyzClients {
	return &readyzClients{creds: creds, clients: map[string]readyzClient{}}
}

// sync drops the clients of members that left or changed.
func (r *readyzClients) sync(eps []Endpoint) {
	want := make(map[string]Endpoint, len(eps))
	for _, ep := range eps {
		want[ep.Name] = ep
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for name, c := range r.clients {
		if ep, ok := want[name]; !ok || ep != c.ep {
			if c.client != nil {
				c.client.CloseIdleConnections()
			}
			delete(r.clients, name)
		}
	}
}

func (r *readyzClients) get(ep Endpoint) readyzClient {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c, ok := r.clients[ep.Name]; ok && c.ep == ep {
		return c
	}
	c := readyzClient{ep: ep}
	tlsConfig, err := r.creds.ConfigOrPlain(ep.ServerName)
	if err != nil {
		c.err = fmt.Errorf("member %s: client TLS config: %w", ep.Name, err)
	} else {
		c.client = &http.Client{Transport: &http.Transport{
			TLSClientConfig:     tlsConfig,
			MaxIdleConnsPerHost: 1,
			DisableCompression:  true,
			// The environment's proxy settings must not route pod traffic elsewhere.
			Proxy: nil,
		}}
	}
	r.clients[ep.Name] = c
	return c
}

func (r *readyzClients) probe(ctx context.Context, ep Endpoint, url string) error {
	c := r.get(ep)
	if c.err != nil {
		return c.err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("member %s: readyz request: %w", ep.Name, err)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return fmt.Errorf("member %s: %w", ep.Name, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxReadyzBody))
	if err != nil {
		return fmt.Errorf("member %s: read %s: %w", ep.Name, url, err)
	}
	// etcd ends the word with a newline; "ok" with anything else (a verbose check list) is no.
	if resp.StatusCode != http.StatusOK || strings.TrimRight(string(body), "\r\n") != "ok" {
		return &notReadyError{member: ep.Name, status: resp.StatusCode, body: truncate(strings.TrimSpace(string(body)), maxRecordedProbeBody)}
	}
	return nil
}

func (r *readyzClients) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for name, c := range r.clients {
		if c.client != nil {
			c.client.CloseIdleConnections()
		}
		delete(r.clients, name)
	}
}

// notReadyError is a /readyz that answered something other than 200 "ok".
type notReadyError struct {
	member string
	status int
	body   string
}

func (e *notReadyError) Error() string {
	return fmt.Sprintf("member %s not ready: HTTP %d %q", e.member, e.status, e.body)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
