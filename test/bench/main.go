// Command bench is the rollout benchmark (`make bench`): on the local proving ground (real
// kube-apiserver and StatefulSet controller, node simulator, real etcd members with mTLS) it
// bumps the etcd image under each scenario and each update strategy, R times, with a writer and
// the quorum and leader monitors running, and writes what it measured to
// test/bench/results/rollout.{json,md} and rollout-timeline.json, which test/bench/plot draws as
// rollout.png. It asserts nothing: it reports what it saw.
//
// Strategies are interleaved within a repetition so a noisy machine hurts them alike. One stack
// serves the whole benchmark; each run gets its own namespace, cleaned up after it.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"go.uber.org/zap/zapcore"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/etcd-conductor/etcd-conductor/test/bench/report"
	"github.com/etcd-conductor/etcd-conductor/test/framework"
	"github.com/etcd-conductor/etcd-conductor/test/localcluster"
	"github.com/etcd-conductor/etcd-conductor/test/stack"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().UTC().Format("15:04:05")}, args...)...)
}

func run() error {
	var (
		reps          = flag.Int("reps", 3, "repetitions of every scenario × strategy")
		outDir        = flag.String("out", "", "results directory (default <repo>/test/bench/results)")
		onlyScenarios = flag.String("scenarios", "", "comma-separated scenario ids to run (default all)")
		onlyStrats    = flag.String("strategies", "", "comma-separated strategy ids to run (default all)")
		stall         = flag.Duration("stall", 20*time.Second, "a rollout with no progress (and no pod terminating) for this long is recorded as not completed")
		timeout       = flag.Duration("timeout", 4*time.Minute, "upper bound of any one rollout")
		rate          = flag.Float64("rate", 40, "writer Puts per second")
		idle          = flag.Duration("idle", 5*time.Second, "idle baseline before each bump: instruments running, no rollout; its longest write gap is the run's jitter")
		raw           = flag.Bool("raw", false, "also write every run's full instrument report to <out>/raw/")
		note          = flag.String("machine-note", "", "free text about the machine, added to the results")
		operatorLog   = flag.String("operator-log", "", "append the operator's structured logs (every decision and its reason) to this file; default: discarded")
		simLog        = flag.String("sim-log", "", "append the node simulator's logs (pods bound, containers started and exited, probes failed) to this file; default: discarded")
		summarize     = flag.Bool("summarize", false, "run nothing: write rollout.md from the runs in <out>/rollout.json so far")
		rederive      = flag.Bool("rederive", false, "with -summarize: first recompute, from <out>/raw/, the figures the instruments derive (the write gap at the leader step), so results recorded before a change of their definition read as today's")
	)
	flag.Parse()
	if *reps < 1 {
		return fmt.Errorf("-reps must be at least 1")
	}
	ctrl.SetLogger(logr.Discard())
	klog.SetLogger(logr.Discard())

	if *outDir == "" {
		root, err := localcluster.RepoRoot()
		if err != nil {
			return err
		}
		*outDir = filepath.Join(root, "test", "bench", "results")
	}
	if err := os.MkdirAll(*outDir, 0o755); err != nil {
		return err
	}
	if *summarize {
		results, err := report.ReadJSON(filepath.Join(*outDir, "rollout.json"))
		if err != nil {
			return err
		}
		if *rederive {
			if err := rederiveFromRaw(filepath.Join(*outDir, "raw"), &results); err != nil {
				return err
			}
			if err := report.WriteJSON(filepath.Join(*outDir, "rollout.json"), results); err != nil {
				return err
			}
		}
		return os.WriteFile(filepath.Join(*outDir, "rollout.md"), []byte(report.Markdown(results)), 0o644)
	}
	scenarios, err := selectScenarios(*onlyScenarios, *onlyStrats)
	if err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("the node simulator needs root (network namespaces)")
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	began := time.Now()
	cfg := config{
		fromImage: framework.EtcdImage("3.6.8"), toImage: framework.EtcdImage("3.7.3"),
		writeRate: *rate, writeTimeout: 200 * time.Millisecond, stall: *stall, timeout: *timeout,
		idleBaseline: *idle,
	}
	results := report.Results{
		Date:    began.UTC().Format(time.RFC3339),
		Machine: report.ThisMachine(*note),
		Reps:    *reps,
		Settings: report.Settings{
			FromImage: cfg.fromImage, ToImage: cfg.toImage, WriteRate: cfg.writeRate, WriteTimeoutMs: cfg.writeTimeout.Milliseconds(),
			QuorumProbe: "readyz", IdleBaselineSeconds: cfg.idleBaseline.Seconds(), StallSeconds: cfg.stall.Seconds(), TimeoutSeconds: cfg.timeout.Seconds(),
			StaleRoleLeaseRenewal: staleRoleAgentInterval,
		},
		Runs: []report.Run{},
	}
	jsonPath := filepath.Join(*outDir, "rollout.json")
	var closeLogs func()
	cfg.operatorLog, closeLogs, err = debugLog(*operatorLog)
	if err != nil {
		return fmt.Errorf("opening the operator log: %w", err)
	}
	defer closeLogs()
	sim, closeSimLog, err := debugLog(*simLog)
	if err != nil {
		return fmt.Errorf("opening the node simulator log: %w", err)
	}
	defer closeSimLog()
	if *raw {
		cfg.rawDir = filepath.Join(*outDir, "raw")
	}

	logf("starting the stack (kube-apiserver and kube-controller-manager with %s)", maxUnavailableGate)
	s, err := stack.Start(ctx, stack.Options{FeatureGates: maxUnavailableGate, SimLog: sim})
	if err != nil {
		return fmt.Errorf("starting the stack: %w", err)
	}
	defer func() {
		if err := s.Stop(); err != nil {
			logf("stopping the stack: %v", err)
		}
	}()
	logf("stack up after %s", time.Since(began).Round(time.Second))

	kcm := &controllerManager{stack: s, gateOn: true}
	timelines := map[string]*report.Timeline{}
	total := 0
	for _, sc := range scenarios {
		total += len(sc.strategyIDs()) * *reps
	}
	n := 0
	for rep := 1; rep <= *reps; rep++ {
		for _, sc := range scenarios {
			for _, id := range order(sc.strategyIDs(), kcm.gateOn) {
				if ctx.Err() != nil {
					return fmt.Errorf("interrupted; %d runs kept in %s", len(results.Runs), jsonPath)
				}
				n++
				st := strategies[id]
				if err := kcm.ensure(ctx, st); err != nil {
					return err
				}
				logf("[%d/%d] %s / %s, rep %d", n, total, sc.id, st.id, rep)
				o := runOne(ctx, s, cfg, sc, st, rep)
				logf("  %s", describe(o.run))
				results.Runs = append(results.Runs, o.run)
				if sc.id == timelineScenario && timelines[id] == nil && o.timeline != nil {
					timelines[id] = o.timeline
				}
				results.WallSeconds = time.Since(began).Seconds()
				if err := report.WriteJSON(jsonPath, results); err != nil {
					return err
				}
			}
		}
	}
	results.WallSeconds = time.Since(began).Seconds()
	results.Machine.LoadAtEnd = report.LoadAverage()
	logf("%d runs in %s, %d controller-manager restarts", len(results.Runs), time.Since(began).Round(time.Second), kcm.Restarts)
	return writeOutputs(*outDir, results, timelines)
}

// timelineScenario is the one drawn in rollout.png, as the issue asks.
const timelineScenario = "3-one-dead"

func writeOutputs(dir string, results report.Results, timelines map[string]*report.Timeline) error {
	if err := report.WriteJSON(filepath.Join(dir, "rollout.json"), results); err != nil {
		return err
	}
	md := report.Markdown(results)
	if err := os.WriteFile(filepath.Join(dir, "rollout.md"), []byte(md), 0o644); err != nil {
		return err
	}
	var rows []report.Timeline
	for _, id := range report.Strategies {
		if t := timelines[id]; t != nil {
			rows = append(rows, *t)
		}
	}
	if len(rows) > 0 {
		title := fmt.Sprintf("3 members, one dead: %s → %s (%s)", results.Settings.FromImage, results.Settings.ToImage, results.Date)
		// Drawn as rollout.png by test/bench/plot (make bench runs it next).
		if err := report.WriteTimelineFigure(filepath.Join(dir, report.TimelineFile), report.TimelineFigure{Title: title, Rows: rows}); err != nil {
			return err
		}
	}
	fmt.Println(report.Table(results.Runs))
	if stale := report.StaleRoleTable(results.Runs); stale != "" {
		fmt.Println(stale)
	}
	logf("wrote %s/rollout.{json,md} and %s", dir, report.TimelineFile)
	return nil
}

func describe(r report.Run) string {
	state := fmt.Sprintf("completed in %.1fs", r.RolloutSeconds)
	if !r.Completed {
		state = fmt.Sprintf("NOT completed after %.1fs", r.RolloutSeconds)
	}
	s := fmt.Sprintf("%s: quorumLoss=%dms unconfirmedByTimeouts=%dms leaderStepGap=%dms idleJitter=%dms longestWriteGap=%dms failed=%d (timeouts %d, refusals %d) acked=%d lost=%d leaderChanges=%d deletions=%d (participating %d, violations %d)",
		state, r.QuorumLossMs, r.QuorumUnconfirmedMs, r.LeaderStepGapMs, r.IdleJitterMs, r.LongestWriteGapMs, r.FailedWrites,
		r.WriteTimeouts, r.WriteRefusals, r.AckedWrites, r.LostAckedWrites, r.LeaderChanges,
		r.Deletions, r.ParticipatingDeletions, r.InvariantViolations)
	if r.LeaderDeletedWhileFollowersRemained != nil {
		s += fmt.Sprintf(" leaderDeletedWhileFollowersRemained=%d", *r.LeaderDeletedWhileFollowersRemained)
	}
	if r.Note != "" {
		s += " — " + r.Note
	}
	return s
}

func selectScenarios(onlyScenarios, onlyStrategies string) ([]scenario, error) {
	wantSc, wantSt := set(onlyScenarios), set(onlyStrategies)
	for id := range wantSt {
		if _, ok := strategies[id]; !ok {
			return nil, fmt.Errorf("unknown strategy %q (have %s)", id, strings.Join(report.Strategies, ", "))
		}
	}
	var out []scenario
	known := map[string]bool{}
	for _, sc := range allScenarios() {
		known[sc.id] = true
		if (len(wantSc) > 0 && !wantSc[sc.id]) || (len(wantSc) == 0 && sc.onRequest) {
			continue
		}
		if len(wantSt) > 0 {
			var ids []string
			for _, id := range sc.strategyIDs() {
				if wantSt[id] {
					ids = append(ids, id)
				}
			}
			if len(ids) == 0 {
				continue
			}
			sc.strategies = ids
		}
		out = append(out, sc)
	}
	for id := range wantSc {
		if !known[id] {
			return nil, fmt.Errorf("unknown scenario %q (have %s)", id, strings.Join(report.Scenarios, ", "))
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no scenario × strategy selected")
	}
	return out, nil
}

func set(csv string) map[string]bool {
	out := map[string]bool{}
	for _, s := range strings.Split(csv, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out[s] = true
		}
	}
	return out
}

// debugLog appends V(1) logs to the file at path, or discards them when path is empty. A rollout
// step takes a few hundred milliseconds, so the timestamps carry nanoseconds.
func debugLog(path string) (logr.Logger, func(), error) {
	if path == "" {
		return logr.Discard(), func() {}, nil
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return logr.Logger{}, nil, err
	}
	return zap.New(zap.WriteTo(f), zap.Level(zapcore.DebugLevel), func(o *zap.Options) {
		o.TimeEncoder = zapcore.RFC3339NanoTimeEncoder
	}), func() { _ = f.Close() }, nil
}
