package backup

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"time"

	"github.com/go-logr/logr"
	"github.com/robfig/cron/v3"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"

	"github.com/etcd-conductor/etcd-conductor/etcdclient"
	"github.com/etcd-conductor/etcd-conductor/internal/contract/memberlease"
	"github.com/etcd-conductor/etcd-conductor/internal/contract/memberpod"
	"github.com/etcd-conductor/etcd-conductor/internal/contract/snapshot"
	"github.com/etcd-conductor/etcd-conductor/internal/store/backupstore"
)

// Member is what the loop asks its own etcd member.
type Member interface {
	Status(ctx context.Context) (etcdclient.MemberStatus, error)
	Revision(ctx context.Context) (int64, error)
	Snapshot(ctx context.Context) (io.ReadCloser, error)
	// Events are the changes of revisions from..to, each with its key's previous value, up to
	// the end of the revision at which they pass maxBytes.
	Events(ctx context.Context, from, to, maxBytes int64) ([]snapshot.Event, error)
	// KeyspaceDigest counts the keys and values at revision rev.
	KeyspaceDigest(ctx context.Context, rev int64) (snapshot.Digest, error)
}

// Config is the backup part of the member-agent's flags.
type Config struct {
	// Store names the store and whose backups they are (the init step restores with the same
	// flags); its Secret is read again every round (a mounted Secret changes in place).
	Store backupstore.Flags
	// SpoolDir holds a full snapshot while it is hashed and uploaded.
	SpoolDir string
	// Compression is how full and delta snapshots are written (--compression-policy).
	Compression  snapshot.Compression
	FullSchedule string
	DeltaPeriod  time.Duration
	GCPeriod     time.Duration
	GCPolicy     snapshot.Policy
	// FullLease and DeltaLease are the snapshot Leases' names in Namespace.
	FullLease, DeltaLease, Namespace string
	// Tick is how often the loop looks at what is due.
	Tick time.Duration
	// SnapshotTimeout bounds taking and uploading one full snapshot.
	SnapshotTimeout time.Duration
}

// Validate reports every missing or unusable setting. A bad provider is not an error here: the
// loop reports it on the Leases, so it shows in the Etcd's status rather than as a crash loop.
func (c Config) Validate() error {
	var errs []error
	for _, f := range []struct{ flag, v string }{
		{"full-snapshot-lease", c.FullLease},
		{"delta-snapshot-lease", c.DeltaLease}, {"backup-spool-dir", c.SpoolDir},
	} {
		if f.v == "" {
			errs = append(errs, fmt.Errorf("--%s is required with --backup-provider", f.flag))
		}
	}
	if _, err := ParseSchedule(c.FullSchedule); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Runner is the backup loop of one member-agent.
type Runner struct {
	cfg      Config
	settings Settings
	member   Member
	leases   leaseWriter
	metrics  *Metrics
	log      logr.Logger
	now      func() time.Time

	store       backupstore.Store
	storeSecret map[string][]byte // the Secret data the store was built from

	leading bool
	term    uint64
	loaded  bool
	lastRev int64
	// keyspace counts the keys and values at lastRev, carried from delta to delta so that each
	// records the keyspace it leaves (nil: not known, counted afresh before the next delta).
	keyspace *snapshot.Accumulator
	// clusterID is the member's etcd cluster (hex), recorded in every snapshot.
	clusterID string
	// origins caches which etcd cluster wrote each object garbage collection considered ("":
	// not recorded); keptLogged the objects it said it keeps.
	origins    map[string]string
	keptLogged map[string]bool
	state      State
	backoff    time.Duration
	// lastReported throttles failure reports: the same message is written at most every 30 s.
	lastReported     string
	lastReportedTime time.Time
}

// NewRunner prepares the loop; it contacts nothing.
func NewRunner(cfg Config, member Member, leases coordinationv1client.LeasesGetter, metrics *Metrics, log logr.Logger) (*Runner, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	sched, _ := ParseSchedule(cfg.FullSchedule)
	if cfg.Tick <= 0 {
		cfg.Tick = 2 * time.Second
	}
	if cfg.SnapshotTimeout <= 0 {
		cfg.SnapshotTimeout = 15 * time.Minute
	}
	return &Runner{
		cfg:        cfg,
		settings:   Settings{FullSchedule: sched, DeltaPeriod: cfg.DeltaPeriod, GCPeriod: cfg.GCPeriod},
		member:     member,
		leases:     leaseWriter{leases: leases.Leases(cfg.Namespace)},
		metrics:    metrics,
		log:        log.WithName("backup"),
		now:        time.Now,
		origins:    map[string]string{},
		keptLogged: map[string]bool{},
	}, nil
}

// ParseSchedule reads the full snapshot schedule (standard cron, as the Etcd's other
// schedules); empty is etcd-druid's default.
func ParseSchedule(s string) (cron.Schedule, error) {
	if s == "" {
		s = memberpod.DefaultFullSnapshotSchedule
	}
	return memberpod.ParseSchedule(s)
}

// Run loops until ctx ends.
func (r *Runner) Run(ctx context.Context) {
	r.log.Info("Backup loop started", "provider", r.cfg.Store.Provider, "container", r.cfg.Store.Container, "prefix", r.cfg.Store.Prefix,
		"fullSnapshotSchedule", r.cfg.FullSchedule, "deltaSnapshotPeriod", r.cfg.DeltaPeriod, "compression", r.cfg.Compression.String())
	ticker := time.NewTicker(r.cfg.Tick)
	defer ticker.Stop()
	for {
		r.Step(ctx)
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// Step does at most one action.
func (r *Runner) Step(ctx context.Context) {
	st, err := r.member.Status(ctx)
	if err != nil || !st.IsLeader() {
		if r.leading {
			r.log.Info("No longer leading: snapshots are the new leader's")
		}
		r.leading = false
		r.metrics.leader.Set(0)
		return
	}
	if !r.leading || st.RaftTerm != r.term {
		r.log.Info("Leading: taking over the snapshots", "raftTerm", st.RaftTerm)
		r.leading, r.term, r.loaded = true, st.RaftTerm, false
		r.state = State{}
		r.backoff = 0
	}
	r.metrics.leader.Set(1)
	r.clusterID = fmt.Sprintf("%x", st.ClusterID)
	store, err := r.openStore()
	if err != nil {
		r.fail(ctx, memberlease.ReasonStoreInvalid, err, snapshot.KindFull, snapshot.KindDelta)
		return
	}
	if !r.loaded {
		if err := r.load(ctx, store); err != nil {
			r.fail(ctx, storeReason(err), err, snapshot.KindFull, snapshot.KindDelta)
			return
		}
	}
	r.state.OnDemand, r.state.OnDemandDelta = "", ""
	if full, _, err := r.leases.read(ctx, r.cfg.FullLease); err == nil && memberlease.Pending(full.Requested, full.Handled) {
		r.state.OnDemand = full.Requested
	}
	if delta, _, err := r.leases.read(ctx, r.cfg.DeltaLease); err == nil && memberlease.Pending(delta.DeltaRequested, delta.DeltaHandled) {
		r.state.OnDemandDelta = delta.DeltaRequested
	}
	r.state.Leader = true
	now := r.now()
	d := Decide(r.state, r.settings, now)
	switch d.Action {
	case ActionFull:
		r.log.Info("Taking a full snapshot", "rule", d.Rule, "reason", d.Reason)
		r.full(ctx, store, d.Rule)
	case ActionDelta:
		r.delta(ctx, store, d.Rule)
	case ActionGC:
		r.gc(ctx, store)
	}
}

// load reads what the store holds: the latest chain decides where deltas continue from.
func (r *Runner) load(ctx context.Context, store backupstore.Store) error {
	adopted, err := Claim(ctx, store, r.owner(), true)
	if err != nil {
		return err
	}
	if adopted != nil {
		r.log.Info("The store held the backups of an earlier Etcd of this name; taking them over", "etcd", adopted.Etcd, "earlierUID", adopted.EtcdUID)
	}
	chain, ok, err := LatestChain(ctx, store)
	if err != nil {
		return err
	}
	r.state.HaveFull = ok
	r.keyspace = nil
	if ok {
		r.lastRev = chain.EndRevision()
		origin, digest := chainEnd(ctx, store, chain)
		switch {
		case origin.ClusterID != "" && origin.ClusterID != r.clusterID:
			// Another etcd cluster wrote the chain (this one was restored from it, maybe not
			// to its end): its revisions are not this cluster's, so nothing may continue it.
			r.log.Info("The latest chain was written by another etcd cluster; starting a new one with a full snapshot",
				"chainCluster", origin.ClusterID, "cluster", r.clusterID)
			r.state.NeedFull = true
		case digest != nil && digest.Revision == r.lastRev:
			if acc, err := snapshot.AccumulatorFrom(*digest); err == nil {
				r.keyspace = &acc
			}
		}
		r.state.LastFull = chain.Full.CreatedOn
		r.state.LastDelta = r.now()
		r.log.Info("Store read", "store", store.String(), "latestFull", chain.Full.Name(), "deltas", len(chain.Deltas), "revision", r.lastRev)
		if chain.Gap != "" {
			r.log.Info("Store has a gap after the latest chain; the next delta continues from its end", "gap", chain.Gap)
		}
	}
	r.loaded = true
	return nil
}

func (r *Runner) owner() snapshot.Owner {
	return snapshot.Owner{Etcd: r.cfg.Store.Etcd, EtcdUID: r.cfg.Store.EtcdUID}
}

func (r *Runner) origin() *snapshot.Origin {
	return &snapshot.Origin{Etcd: r.cfg.Store.Etcd, EtcdUID: r.cfg.Store.EtcdUID, ClusterID: r.clusterID}
}

// chainEnd reads who wrote the end of the chain and the keyspace it recorded there: the last
// delta's header, or the full snapshot's record. Unknown (zero, nil) when it is not recorded or
// cannot be read: the next delta then counts the keyspace afresh.
func chainEnd(ctx context.Context, store backupstore.Store, chain snapshot.Chain) (snapshot.Origin, *snapshot.Digest) {
	if n := len(chain.Deltas); n > 0 {
		f, err := ReadDeltaObject(ctx, store, chain.Deltas[n-1])
		if err != nil || f.Origin == nil {
			return snapshot.Origin{}, nil
		}
		return *f.Origin, f.End
	}
	r, err := store.Get(ctx, snapshot.FullMetaKey(chain.Full))
	if err != nil {
		return snapshot.Origin{}, nil
	}
	defer r.Close()
	m, err := snapshot.DecodeFullMeta(r)
	if err != nil {
		return snapshot.Origin{}, nil
	}
	return m.Origin, m.Digest
}

// ReadDeltaObject reads and decodes one delta object of the store.
func ReadDeltaObject(ctx context.Context, store backupstore.Store, d snapshot.Snapshot) (snapshot.DeltaFile, error) {
	r, err := store.Get(ctx, d.Key())
	if err != nil {
		return snapshot.DeltaFile{}, err
	}
	defer r.Close()
	content, err := snapshot.Decompress(r, d.Compression)
	if err != nil {
		return snapshot.DeltaFile{}, err
	}
	defer content.Close()
	return snapshot.ReadDelta(content)
}

// LatestChain lists the store's snapshots and picks the latest full snapshot and the deltas
// that continue it (snapshot.Latest); ok is false when the store holds no full snapshot. Objects
// that are not snapshots are ignored.
func LatestChain(ctx context.Context, store backupstore.Store) (chain snapshot.Chain, ok bool, err error) {
	objs, err := store.List(ctx, snapshot.Dir)
	if err != nil {
		return snapshot.Chain{}, false, err
	}
	keys := make([]string, 0, len(objs))
	for _, o := range objs {
		keys = append(keys, o.Key)
	}
	snaps, _ := snapshot.ParseAll(keys)
	chain, ok = snapshot.Latest(snaps)
	return chain, ok, nil
}

func (r *Runner) full(ctx context.Context, store backupstore.Store, rule string) {
	start := r.now()
	ctx, cancel := context.WithTimeout(ctx, r.cfg.SnapshotTimeout)
	defer cancel()
	snap, obj, err := UploadFull(ctx, r.member, store, r.cfg.SpoolDir, start, r.cfg.Compression)
	if err != nil {
		reason := memberlease.ReasonSnapshotFailed
		if errors.Is(err, errUpload) {
			reason = storeReason(err)
		}
		r.fail(ctx, reason, err, snapshot.KindFull)
		r.metrics.duration.WithLabelValues(string(snapshot.KindFull), "failed").Observe(r.now().Sub(start).Seconds())
		return
	}
	r.recordFull(ctx, store, snap)
	elapsed := r.now().Sub(start)
	handled := r.state.OnDemand
	r.state.HaveFull, r.state.LastFull, r.state.LastDelta, r.state.NeedFull, r.state.OnDemand = true, start, start, false, ""
	r.lastRev = snap.EndRevision
	r.succeeded(snapshot.KindFull, rule, obj.Size, start, elapsed)
	r.log.Info("Full snapshot uploaded", "key", obj.Key, "revision", snap.EndRevision, "bytes", obj.Size, "duration", elapsed.Round(time.Millisecond),
		"MBps", fmt.Sprintf("%.1f", float64(obj.Size)/1e6/elapsed.Seconds()))
	r.record(ctx, r.cfg.FullLease, snap.EndRevision, start, obj, answer{memberlease.AnnotationFullSnapshotHandled, handled})
	// A delta lease still at an older revision would look stale: the full snapshot covers it.
	r.record(ctx, r.cfg.DeltaLease, snap.EndRevision, start, obj, answer{})
}

// recordFull counts the keyspace at the full snapshot's revision, where the next delta starts
// counting, and records it with the snapshot's origin beside the snapshot. Neither is needed to
// restore the snapshot, so a failure is logged, not a failed snapshot.
func (r *Runner) recordFull(ctx context.Context, store backupstore.Store, snap snapshot.Snapshot) {
	r.keyspace = nil
	meta := snapshot.FullMeta{Origin: *r.origin()}
	if d, err := r.member.KeyspaceDigest(ctx, snap.EndRevision); err != nil {
		r.log.Info("Could not count the keyspace of the full snapshot; the next delta counts it", "revision", snap.EndRevision, "error", err.Error())
	} else if acc, err := snapshot.AccumulatorFrom(d); err == nil {
		meta.Digest, r.keyspace = &d, &acc
	}
	b := snapshot.EncodeFullMeta(meta)
	if _, err := store.Put(ctx, snapshot.FullMetaKey(snap), bytes.NewReader(b), int64(len(b)), backupstore.SHA256Hex(b)); err != nil {
		r.log.Info("Could not record the full snapshot's origin beside it", "key", snapshot.FullMetaKey(snap), "error", err.Error())
	}
}

func (r *Runner) delta(ctx context.Context, store backupstore.Store, rule string) {
	start := r.now()
	ctx, cancel := context.WithTimeout(ctx, r.cfg.SnapshotTimeout)
	defer cancel()
	cur, err := r.member.Revision(ctx)
	if err != nil {
		r.fail(ctx, memberlease.ReasonSnapshotFailed, err, snapshot.KindDelta)
		return
	}
	// A request is answered by this delta (or by the record that nothing changed), even when more
	// was written than one delta holds: what was written before it was asked for is in the store.
	requested := answer{memberlease.AnnotationDeltaSnapshotHandled, r.state.OnDemandDelta}
	if cur <= r.lastRev {
		// Nothing written since: the backup is as fresh as it can be; say so on the Lease.
		r.state.LastDelta, r.state.OnDemandDelta = start, ""
		r.record(ctx, r.cfg.DeltaLease, r.lastRev, start, backupstore.Object{}, requested)
		r.metrics.latest.WithLabelValues(string(snapshot.KindDelta)).Set(float64(start.Unix()))
		return
	}
	f, keyspace, err := BuildDelta(ctx, r.member, r.lastRev+1, cur, r.keyspace, r.origin())
	if errors.Is(err, etcdclient.ErrCompacted) {
		r.log.Info("Events since the last snapshot are compacted; the next snapshot is a full one", "from", r.lastRev+1)
		r.state.NeedFull = true
		return
	}
	if err != nil {
		r.fail(ctx, memberlease.ReasonSnapshotFailed, err, snapshot.KindDelta)
		return
	}
	if keyspace == nil {
		r.log.V(1).Info("The keyspace could not be counted; this delta records no digest of it", "from", r.lastRev+1, "to", f.EndRevision)
	}
	_, obj, err := UploadDelta(ctx, store, f, start, r.cfg.Compression)
	if errors.Is(err, errEncode) {
		r.fail(ctx, memberlease.ReasonSnapshotFailed, err, snapshot.KindDelta)
		return
	}
	if err != nil {
		r.fail(ctx, storeReason(err), err, snapshot.KindDelta)
		r.metrics.duration.WithLabelValues(string(snapshot.KindDelta), "failed").Observe(r.now().Sub(start).Seconds())
		return
	}
	elapsed := r.now().Sub(start)
	r.lastRev, r.keyspace, r.state.OnDemandDelta = f.EndRevision, keyspace, ""
	if f.EndRevision == cur {
		r.state.LastDelta = start
	} // else more was written than one delta holds: the next delta is due at once
	r.succeeded(snapshot.KindDelta, rule, obj.Size, start, elapsed)
	r.log.V(1).Info("Delta snapshot uploaded", "key", obj.Key, "events", len(f.Events), "bytes", obj.Size)
	r.record(ctx, r.cfg.DeltaLease, f.EndRevision, start, obj, requested)
}

func (r *Runner) gc(ctx context.Context, store backupstore.Store) {
	r.state.LastGC = r.now()
	objs, err := store.List(ctx, snapshot.Dir)
	if err != nil {
		r.log.Info("Garbage collection could not list the store", "error", err.Error())
		return
	}
	keys := make([]string, 0, len(objs))
	for _, o := range objs {
		keys = append(keys, o.Key)
	}
	snaps, _ := snapshot.ParseAll(keys)
	for _, d := range snapshot.GarbageCollect(snaps, r.cfg.GCPolicy, r.now()) {
		if writer, ours := r.writtenHere(ctx, store, d.Snapshot); !ours {
			if !r.keptLogged[d.Snapshot.Key()] {
				r.keptLogged[d.Snapshot.Key()] = true
				r.log.Info("Garbage collection keeps a snapshot this etcd cluster did not write", "key", d.Snapshot.Key(), "writtenBy", writer, "rule", d.Rule)
			}
			continue
		}
		if err := store.Delete(ctx, d.Snapshot.Key()); err != nil {
			r.log.Info("Garbage collection could not delete a snapshot", "key", d.Snapshot.Key(), "error", err.Error())
			continue
		}
		if d.Snapshot.Kind == snapshot.KindFull {
			if err := store.Delete(ctx, snapshot.FullMetaKey(d.Snapshot)); err != nil {
				r.log.Info("Garbage collection could not delete a full snapshot's record", "key", snapshot.FullMetaKey(d.Snapshot), "error", err.Error())
			}
		}
		r.metrics.deleted.WithLabelValues(d.Rule).Inc()
		r.log.Info("Snapshot garbage-collected", "key", d.Snapshot.Key(), "rule", d.Rule, "reason", d.Reason)
	}
}

// writtenHere says whether this etcd cluster wrote s, from the origin its delta header or its
// full snapshot record holds (read once per object: objects never change). Only those are
// garbage-collected: another cluster's (the one this was restored from, with writes a restore
// may not have reached) and those whose writer is not recorded (etcd-backup-restore's, or read
// failing now) stay. writer names who wrote it, for the log.
func (r *Runner) writtenHere(ctx context.Context, store backupstore.Store, s snapshot.Snapshot) (writer string, ours bool) {
	cluster, ok := r.origins[s.Key()]
	if !ok {
		var origin *snapshot.Origin
		if s.Kind == snapshot.KindDelta {
			if f, err := ReadDeltaObject(ctx, store, s); err == nil {
				origin = f.Origin
			} else if !errors.Is(err, backupstore.ErrNotFound) {
				return "unknown (" + err.Error() + ")", false
			}
		} else if rc, err := store.Get(ctx, snapshot.FullMetaKey(s)); err == nil {
			m, derr := snapshot.DecodeFullMeta(rc)
			_ = rc.Close()
			if derr == nil {
				origin = &m.Origin
			}
		} else if !errors.Is(err, backupstore.ErrNotFound) {
			return "unknown (" + err.Error() + ")", false
		}
		if origin != nil {
			cluster = origin.ClusterID
		}
		r.origins[s.Key()] = cluster
	}
	switch {
	case cluster == "":
		return "not recorded", false
	case cluster != r.clusterID:
		return "etcd cluster " + cluster, false
	}
	return "this etcd cluster", true
}

// record writes a snapshot Lease, fenced: only while this member still leads in the term the
// loop started under, so an agent that lost leadership mid-snapshot never moves the Leases.
// ans, when set, records the on-demand request the snapshot answered.
func (r *Runner) record(ctx context.Context, lease string, rev int64, at time.Time, obj backupstore.Object, ans answer) {
	st, err := r.member.Status(ctx)
	if err != nil || !st.IsLeader() || st.RaftTerm != r.term {
		r.log.Info("Leadership changed during the snapshot; leaving the Lease to the new leader", "lease", lease, "revision", rev)
		r.leading = false
		return
	}
	if err := r.leases.recordSnapshot(ctx, lease, rev, at, obj.Key, obj.Size, ans); err != nil {
		r.log.Info("Snapshot Lease not updated", "lease", lease, "error", err.Error())
		return
	}
	r.lastReported = ""
}

func (r *Runner) succeeded(kind snapshot.Kind, rule string, size int64, at time.Time, elapsed time.Duration) {
	r.backoff = 0
	r.state.RetryAt = time.Time{}
	r.metrics.size.WithLabelValues(string(kind)).Set(float64(size))
	r.metrics.latest.WithLabelValues(string(kind)).Set(float64(at.Unix()))
	r.metrics.taken.WithLabelValues(string(kind), rule).Inc()
	r.metrics.duration.WithLabelValues(string(kind), "succeeded").Observe(elapsed.Seconds())
}

// fail backs off, counts the failure and reports it on the Leases of kinds.
func (r *Runner) fail(ctx context.Context, reason string, err error, kinds ...snapshot.Kind) {
	now := r.now()
	r.backoff = min(max(2*r.backoff, 2*time.Second), time.Minute)
	if r.settings.DeltaPeriod > 0 {
		r.backoff = min(r.backoff, r.settings.DeltaPeriod)
	}
	r.state.RetryAt = now.Add(r.backoff)
	if reason != memberlease.ReasonSnapshotFailed {
		// Whatever the store held may have changed meanwhile: read it afresh once it answers.
		r.loaded = false
	}
	msg := err.Error()
	for _, k := range kinds {
		r.metrics.failures.WithLabelValues(string(k), reason).Inc()
	}
	if msg == r.lastReported && now.Sub(r.lastReportedTime) < 30*time.Second {
		return
	}
	r.log.Info("Backup failed", "reason", reason, "error", msg, "retryIn", r.backoff)
	for _, k := range kinds {
		lease := r.cfg.FullLease
		if k == snapshot.KindDelta {
			lease = r.cfg.DeltaLease
		}
		if err := r.leases.recordFailure(ctx, lease, reason, msg, now); err != nil {
			r.log.Info("Could not report the failure on the Lease", "lease", lease, "error", err.Error())
			return
		}
	}
	r.lastReported, r.lastReportedTime = msg, now
}

// openStore builds the store from the flags and the Secret as mounted now, again only when the
// Secret's content changed. Its calls are not retried here (no backupstore.Retrying): the loop is
// the retry, with its own backoff, and a store that is down must show in BackupReady within
// seconds, not after a minute of retries holding the loop (the e2e backup scenario measures it).
func (r *Runner) openStore() (backupstore.Store, error) {
	cfg, err := r.cfg.Store.Config()
	if err != nil {
		return nil, err
	}
	if r.store != nil && maps.EqualFunc(cfg.Secret, r.storeSecret, bytes.Equal) {
		return r.store, nil
	}
	store, err := backupstore.New(cfg)
	if err != nil {
		return nil, err
	}
	r.store, r.storeSecret, r.loaded = store, maps.Clone(cfg.Secret), false
	return store, nil
}

// storeReason tells a store that could not be reached from other upload failures.
func storeReason(err error) string {
	var perr *backupstore.ProviderError
	var serr *backupstore.SecretError
	var shared *SharedError
	switch {
	case errors.As(err, &shared):
		return memberlease.ReasonStoreShared
	case errors.As(err, &perr), errors.As(err, &serr):
		return memberlease.ReasonStoreInvalid
	case backupstore.IsUnreachable(err):
		return memberlease.ReasonStoreUnreachable
	}
	return memberlease.ReasonUploadFailed
}
