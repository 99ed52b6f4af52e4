package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/go-logr/logr"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/etcd-conductor/etcd-conductor/internal/decide/rollout"
	"github.com/etcd-conductor/etcd-conductor/test/bench/report"
	"github.com/etcd-conductor/etcd-conductor/test/framework"
	scenariopkg "github.com/etcd-conductor/etcd-conductor/test/scenario"
	"github.com/etcd-conductor/etcd-conductor/test/stack"
	"github.com/etcd-conductor/etcd-conductor/test/workload"
)

// config is what every run shares.
type config struct {
	fromImage, toImage string
	writeRate          float64
	writeTimeout       time.Duration
	// stall: no progress for this long and the rollout counts as not completed; timeout bounds
	// any rollout.
	stall, timeout time.Duration
	// rawDir, when set, receives each run's full workload report (every sample) as JSON.
	rawDir string
	// idleBaseline is the window before the bump with the instruments running and no rollout;
	// its longest write gap is the run's idle jitter.
	idleBaseline time.Duration
	// operatorLog receives the operator's logs (-operator-log).
	operatorLog logr.Logger
}

// runEnv is what a scenario's hooks act on during one run.
type runEnv struct {
	stack    *stack.Stack
	cluster  *stack.EtcdCluster
	recorder *workload.Recorder
	// cleanups run when the run ends, before the Etcd is deleted.
	cleanups []func()
}

// outcome is one run's figures plus what the picture needs.
type outcome struct {
	run      report.Run
	timeline *report.Timeline
}

const etcdName = "etcd"

// runOne rolls one Etcd from cfg.fromImage to cfg.toImage under sc's fault and st's strategy.
// Everything that goes wrong is recorded on the run (completed: false, note) rather than
// returned: the benchmark goes on with the next run.
func runOne(ctx context.Context, s *stack.Stack, cfg config, sc scenario, st strategy, rep int) outcome {
	out := outcome{run: report.Run{Scenario: sc.id, Strategy: st.id, Rep: rep}}
	fail := func(format string, args ...any) outcome {
		out.run.Note = fmt.Sprintf(format, args...)
		return out
	}

	phases := newPhases()
	defer func() { logf("  phases: %s", phases) }()
	op, err := framework.RunOperator(s.Cluster.RESTConfig(), framework.OperatorOptions{
		FeatureGates:        st.gates(),
		MemberRoleSource:    st.roleSource,
		MemberAgentInterval: sc.agentInterval,
		OnDelete:            st.tune,
		Logger:              cfg.operatorLog,
	})
	if err != nil {
		return fail("starting the operator: %v", err)
	}
	defer func() {
		if err := op.Stop(); err != nil {
			logf("  operator stopped with an error: %v", err)
		}
	}()

	ns := rawName(sc.id, st.id, rep)
	cluster, err := s.CreateEtcd(ctx, ns, etcdName, sc.replicas, cfg.fromImage)
	if err != nil {
		return fail("creating the Etcd: %v", err)
	}
	e := &runEnv{stack: s, cluster: cluster}
	defer func() {
		for _, c := range e.cleanups {
			c()
		}
		if err := cleanUp(s, cluster); err != nil {
			logf("  cleaning up %s: %v", ns, err)
		}
		phases.mark("cleanup")
	}()

	if st.maxUnavailable {
		if err := setMaxUnavailable(ctx, s.Client, ns, etcdName); err != nil {
			return fail("%v", err)
		}
	}
	startCtx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	err = cluster.WaitConverged(startCtx, cfg.fromImage)
	cancel()
	if err != nil {
		return fail("the initial cluster did not come up: %v", err)
	}
	phases.mark("create")
	if sc.fault != nil {
		if err := sc.fault(ctx, e); err != nil {
			return fail("injecting the fault: %v", err)
		}
		phases.mark("fault")
	}

	// Figures count from the moment the fault has settled and the instruments work (a stable
	// leader, a quorum seen, a write acknowledged): their first connections on a busy machine and
	// the election a killed member caused are not the rollout's doing.
	atBump := func(ctx context.Context, in *scenariopkg.Instruments) error {
		e.recorder = in.Recorder
		phases.mark("instruments+idle")
		if sc.beforeBump == nil {
			return nil
		}
		return sc.beforeBump(ctx, e)
	}
	res, err := scenariopkg.Run(ctx, scenariopkg.Spec{
		Cluster: cluster, Image: cfg.toImage,
		Writer:      workload.WriterOptions{Rate: cfg.writeRate, RequestTimeout: cfg.writeTimeout},
		Concurrency: st.concurrency, Idle: cfg.idleBaseline,
		AtBump: atBump, Stall: cfg.stall, Timeout: cfg.timeout,
	})
	phases.mark("rollout+audit")
	if res.Bumped.IsZero() {
		return fail("%v", err)
	}
	rep0, deletions, bumped := res.Report, res.Deletions, res.Bumped
	if cfg.rawDir != "" {
		if err := writeRaw(filepath.Join(cfg.rawDir, ns+".json"), bumped, rep0, deletions); err != nil {
			logf("  %v", err)
		}
	}

	run := &out.run
	run.Completed = res.Completed
	run.Rollout = res.Rollout
	var notes []string
	if res.Note != "" {
		notes = append(notes, res.Note)
	}
	if err != nil {
		notes = append(notes, err.Error())
	}
	if res.RecorderErr != nil {
		notes = append(notes, fmt.Sprintf("recorder: %v", res.RecorderErr))
	}
	if res.AuditErr != nil {
		notes = append(notes, fmt.Sprintf("deletion audit incomplete: %v", res.AuditErr))
	}
	run.Note = strings.Join(notes, "; ")
	if st.onDelete {
		run.Decisions = decisions(op)
	}

	members := make([]string, sc.replicas)
	for i := range members {
		members[i] = cluster.PodName(i)
	}
	at := make([]time.Time, 0, len(deletions))
	for _, d := range deletions {
		dr := report.DeletionRecord{
			AtSeconds:       d.At.Sub(bumped).Seconds(),
			Pod:             d.Pod,
			Participating:   d.Participating,
			Leader:          leaderAt(rep0.LeaderEpochs, d.At),
			RejoinedByProbe: d.RejoinedByProbe,
		}
		if st.onDelete {
			// The auditor judges against the StatefulSet's status.updateRevision as last
			// watched. Our controller deletes only after reading that status; the StatefulSet
			// controller deletes first and writes the new revision after, so for it the
			// auditor's "updated" would be the previous revision.
			dr.Violation = d.Violation
		}
		run.DeletionLog = append(run.DeletionLog, dr)
		at = append(at, d.At)
		run.Deletions++
		if d.Participating {
			run.ParticipatingDeletions++
		}
		if st.onDelete && d.Violation != "" {
			run.InvariantViolations++
		}
	}
	if report.IsStaleRole(sc.id) {
		// The update revision the rollout ended on: it no longer changes once the rollout is over.
		state, err := cluster.State(ctx)
		if err != nil {
			logf("  reading the rollout state for the stale-role count: %v", err)
		}
		outdated := func(i int) bool {
			return rollout.IsOutdated(rollout.PodState{Revision: deletions[i].Revision}, state.UpdateRevision)
		}
		n := leaderDeletedWhileFollowersRemained(run.DeletionLog, at, members, outdated, rep0.Participation)
		run.LeaderDeletedWhileFollowersRemained = &n
	}
	out.timeline = timeline(st.id, run, members, bumped, rep0, deletions)
	return out
}

// rawRun is one run's full instrument report, as -raw keeps it.
type rawRun struct {
	Bumped    time.Time        `json:"bumped"`
	Report    workload.Report  `json:"report"`
	Deletions []stack.Deletion `json:"deletions"`
}

// rawName is the file of a run in the raw directory: its namespace.
func rawName(scenario, strategy string, rep int) string {
	return fmt.Sprintf("bench-%s-%s-%d", scenario, strategy, rep)
}

func writeRaw(path string, bumped time.Time, rep workload.Report, deletions []stack.Deletion) error {
	data, err := json.MarshalIndent(rawRun{bumped, rep, deletions}, "", " ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

// phases times the steps of a run, for the log.
type phases struct {
	last  time.Time
	steps []string
}

func newPhases() *phases { return &phases{last: time.Now()} }

func (p *phases) mark(step string) {
	now := time.Now()
	p.steps = append(p.steps, fmt.Sprintf("%s %.1fs", step, now.Sub(p.last).Seconds()))
	p.last = now
}

func (p *phases) String() string { return strings.Join(p.steps, ", ") }

// decisions reads the OnDelete controller's counters from the operator's registry.
func decisions(op *framework.RunningOperator) map[string]int {
	families, err := op.Registry.Gather()
	if err != nil {
		return map[string]int{"gather error": 1}
	}
	out := map[string]int{}
	for _, f := range families {
		var kind string
		switch f.GetName() {
		case "etcd_conductor_rollout_deletions_total":
			kind = "delete"
		case "etcd_conductor_rollout_waits_total":
			kind = "wait"
		case "etcd_conductor_role_mismatches_total":
			kind = "role-mismatch"
		default:
			continue
		}
		for _, m := range f.GetMetric() {
			name := kind
			if rule := label(m, "rule"); rule != "" {
				name += " " + rule
			}
			out[name] += int(m.GetCounter().GetValue())
		}
	}
	return out
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// timeline turns a run into the picture's row; times relative to the bump.
func timeline(strategy string, run *report.Run, members []string, bumped time.Time, rep workload.Report, deletions []stack.Deletion) *report.Timeline {
	rel := func(t time.Time) float64 { return t.Sub(bumped).Seconds() }
	t := &report.Timeline{
		Strategy: strategy, Completed: run.Completed, RolloutSeconds: run.RolloutSeconds, Members: members,
		FailedWrites: rep.FailedWrites, Start: rel(rep.Started), End: rel(rep.Stopped),
	}
	open := map[string]float64{}
	for _, s := range rep.Participation {
		from, isOpen := open[s.Member]
		switch {
		case s.Participating && !isOpen:
			open[s.Member] = rel(s.At)
		case !s.Participating && isOpen:
			t.Participation = append(t.Participation, report.Span{Member: s.Member, From: from, To: rel(s.At)})
			delete(open, s.Member)
		}
	}
	names := make([]string, 0, len(open))
	for m := range open {
		names = append(names, m)
	}
	sort.Strings(names)
	for _, m := range names {
		t.Participation = append(t.Participation, report.Span{Member: m, From: open[m], To: t.End})
	}
	for _, d := range deletions {
		t.Deletions = append(t.Deletions, report.Mark{Member: d.Pod, At: rel(d.At)})
	}
	for _, l := range rep.WriteLatencies {
		t.Latencies = append(t.Latencies, report.Point{At: rel(l.At), Ms: l.LatencyMs})
	}
	return t
}

// cleanUp removes the members at once (stack.RemoveMembers) and deletes the run's namespace
// (stack.DeleteNamespace: through the namespace controller, claims and the simulator's volumes
// with it), so a long benchmark does not fill the disk.
func cleanUp(s *stack.Stack, c *stack.EtcdCluster) error {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	if err := s.RemoveMembers(ctx, c); err != nil {
		return err
	}
	return s.DeleteNamespace(ctx, c.Namespace)
}

// rederiveFromRaw recomputes, for every run kept in rawDir, the figures the instruments derive
// from the recorded report (the write gap at the leader step), so a definition changed after the
// runs applies to them; a run without a raw file keeps its figure.
func rederiveFromRaw(rawDir string, results *report.Results) error {
	for i := range results.Runs {
		r := &results.Runs[i]
		data, err := os.ReadFile(filepath.Join(rawDir, rawName(r.Scenario, r.Strategy, r.Rep)+".json"))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("reading the raw report of %s/%s rep %d: %w", r.Scenario, r.Strategy, r.Rep, err)
		}
		var raw rawRun
		if err := json.Unmarshal(data, &raw); err != nil {
			return fmt.Errorf("parsing the raw report of %s/%s rep %d: %w", r.Scenario, r.Strategy, r.Rep, err)
		}
		r.LeaderStepGapMs = raw.Report.LeaderStepGapMs()
	}
	return nil
}
