// Command fleetbench runs the fleet benchmark (`make bench-fleet`): for each fleet size, the
// manager built from a git ref ("before") and the current tree's bin/etcd-conductor ("after"),
// each on a fresh local control plane, side by side in one table.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/etcd-conductor/etcd-conductor/test/bench/fleet"
	"github.com/etcd-conductor/etcd-conductor/test/bench/report"
)

func main() {
	sizes := flag.String("n", "100,300", "fleet sizes, comma-separated (\"\" or 0: none, only the image bump)")
	before := flag.String("before", "a25b047", "git ref of the \"before\" manager (built and cached by commit); empty skips it")
	after := flag.String("after", "", "git ref of the \"after\" manager; empty: the current tree's bin/etcd-conductor")
	afterConfig := flag.String("after-config", "", "OperatorConfiguration fields (YAML) only the \"after\" binary knows, e.g. 'clientConnection: {qps: 100, burst: 200}'")
	replicas := flag.Int("replicas", 3, "members per Etcd")
	perNamespace := flag.Int("per-namespace", 10, "Etcds per namespace")
	noKCM := flag.Bool("no-controller-manager", false, "run no kube-controller-manager: StatefulSets get no pods")
	bump := flag.Bool("bump", true, "also measure a restart during which one Etcd's image changes")
	rolloutClusters := flag.Int("rollout-clusters", 5, "clusters of -replicas real members for the fleet-wide image bump (node simulator, needs root); 0 skips it")
	convergeTimeout := flag.Duration("converge-timeout", 30*time.Minute, "give up on a binary's convergence after this long (reported as timed out)")
	restartTimeout := flag.Duration("restart-timeout", 20*time.Minute, "give up on a restart (or a bump's wait) after this long (reported as timed out)")
	beforeConvergeTimeout := flag.Duration("before-converge-timeout", 0, "a shorter -converge-timeout for the \"before\" binary only (0: the same), so a before that cannot converge a large fleet leaves the run time to measure after")
	hold := flag.String("hold", "", "N@HH:MM: fleet sizes of at least N start no earlier than HH:MM UTC (a shared machine kept quiet from then), e.g. 1000@02:05")
	afterFirst := flag.Bool("after-first", false, "measure \"after\" before \"before\" at each size (so a short session gets the new figures first)")
	gates := flag.String("feature-gates", "QuorumAwareUpdatesWithOnDelete=true", "manager feature gates, name=bool,...")
	out := flag.String("out", "test/bench/results", "directory for fleet-<date>.md and .json")
	note := flag.String("note", "shared 2-core machine (6 engineers building and testing): figures are noisy", "a line for the results header")
	render := flag.String("render", "", "only print the tables of a results JSON file again (and rewrite its .md)")
	flag.Parse()
	// The admin clients log nothing worth reading here; the managers' logs are files.
	ctrllog.SetLogger(logr.Discard())
	if *render != "" {
		if err := rerender(*render); err != nil {
			fmt.Fprintf(os.Stderr, "fleetbench: %v\n", err)
			os.Exit(1)
		}
		return
	}
	if err := run(*sizes, *before, *after, *afterConfig, *replicas, *perNamespace, *noKCM, *bump, *rolloutClusters, *gates, *out, *note,
		timeouts{converge: *convergeTimeout, beforeConverge: *beforeConvergeTimeout, restart: *restartTimeout, afterFirst: *afterFirst, hold: *hold}); err != nil {
		fmt.Fprintf(os.Stderr, "fleetbench: %v\n", err)
		os.Exit(1)
	}
}

func run(sizesFlag, beforeRef, afterRef, afterConfig string, replicas, perNamespace int, noKCM, bump bool, rolloutClusters int, gatesFlag, out, note string, t timeouts) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var sizes []int
	for _, s := range strings.Split(sizesFlag, ",") {
		if s = strings.TrimSpace(s); s == "" || s == "0" {
			continue
		}
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			return fmt.Errorf("-n: %q is not a positive number", s)
		}
		sizes = append(sizes, n)
	}
	gates := map[string]bool{}
	for _, g := range strings.Split(gatesFlag, ",") {
		if g = strings.TrimSpace(g); g == "" {
			continue
		}
		name, value, ok := strings.Cut(g, "=")
		on, err := strconv.ParseBool(value)
		if !ok || err != nil {
			return fmt.Errorf("-feature-gates: %q is not name=true|false", g)
		}
		gates[name] = on
	}
	var binaries []fleet.Binary
	if beforeRef != "" {
		fmt.Printf("building the manager at %s (cached by commit)...\n", beforeRef)
		b, err := fleet.BinaryAt("before", beforeRef)
		if err != nil {
			return err
		}
		binaries = append(binaries, b)
	}
	a, err := afterBinary(afterRef)
	if err != nil {
		return err
	}
	binaries = append(binaries, a)
	workDir, err := os.MkdirTemp("", "fleetbench-")
	if err != nil {
		return err
	}
	rep := fleet.Report{Started: time.Now(), Machine: report.ThisMachine(note), Binaries: binaries}
	opts := fleet.Options{
		Replicas: int32(replicas), PerNamespace: perNamespace, NoControllerManager: noKCM, Bump: bump,
		FeatureGates: gates, ExtraConfig: map[string]string{"after": afterConfig}, WorkDir: workDir, Log: os.Stdout,
		ConvergeTimeout: t.converge, RestartTimeout: t.restart,
	}
	order := binaries
	if t.afterFirst {
		order = make([]fleet.Binary, 0, len(binaries))
		for i := len(binaries) - 1; i >= 0; i-- {
			order = append(order, binaries[i])
		}
	}
	for _, n := range sizes {
		until, err := holdUntil(t.hold, n, time.Now())
		if err != nil {
			return err
		}
		if wait := time.Until(until); wait > 0 {
			fmt.Printf("%s holding N=%d until %s UTC (-hold %s)\n", time.Now().UTC().Format("15:04:05"), n, until.Format("15:04"), t.hold)
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(wait):
			}
		}
		size := fleet.SizeResults{N: n}
		byLabel := map[string]fleet.Result{}
		for _, b := range order {
			opts.N = n
			opts.ConvergeTimeout = t.converge
			if b.Label == "before" && t.beforeConverge > 0 {
				opts.ConvergeTimeout = t.beforeConverge
			}
			// A binary that did not finish (say, a before that never converged) is reported as
			// such and the next one is measured all the same; only an interrupt ends the run.
			res, err := fleet.Run(ctx, b, opts)
			if err != nil {
				fmt.Printf("%s at N=%d did not finish: %v\n", b.Label, n, err)
				if size.Failed == nil {
					size.Failed = map[string]string{}
				}
				size.Failed[b.Label] = err.Error()
			}
			byLabel[b.Label] = res
			if ctx.Err() != nil {
				break
			}
		}
		// The table keeps the binaries' order (before | after) whatever order they ran in.
		for _, b := range binaries {
			if res, ok := byLabel[b.Label]; ok {
				size.Results = append(size.Results, res)
			}
		}
		rep.Sizes = append(rep.Sizes, size)
		// Written after every size, so a run cut short keeps what it measured.
		if _, err := rep.WriteFiles(out); err != nil {
			return err
		}
		if ctx.Err() != nil {
			break
		}
	}
	if rolloutClusters > 0 && ctx.Err() == nil {
		rollouts, err := fleet.RunRollouts(ctx, binaries, fleet.RolloutOptions{
			Clusters: rolloutClusters, Replicas: int32(replicas), FeatureGates: gates,
			ExtraConfig: opts.ExtraConfig, WorkDir: workDir, Log: os.Stdout,
		})
		if err != nil {
			fmt.Printf("fleet-wide image bump did not run: %v\n", err)
		}
		rep.Rollouts = rollouts
	}
	rep.Finished = time.Now()
	rep.Machine.LoadAtEnd = report.LoadAverage()
	rep.Markdown(os.Stdout)
	path, err := rep.WriteFiles(out)
	if err != nil {
		return err
	}
	fmt.Printf("written: %s (+ .json); manager logs in %s\n", path, workDir)
	return ctx.Err()
}

// timeouts bound the phases of one binary's run.
type timeouts struct {
	converge, beforeConverge, restart time.Duration
	afterFirst                        bool
	// hold is -hold: "N@HH:MM".
	hold string
}

// holdUntil returns when a fleet of n Etcds may start under hold ("N@HH:MM", UTC; the next such
// time from now), or the zero time when it need not wait.
func holdUntil(hold string, n int, now time.Time) (time.Time, error) {
	if hold == "" {
		return time.Time{}, nil
	}
	sizeText, clock, ok := strings.Cut(hold, "@")
	size, err := strconv.Atoi(sizeText)
	if !ok || err != nil || size <= 0 {
		return time.Time{}, fmt.Errorf("-hold: %q is not N@HH:MM", hold)
	}
	at, err := time.Parse("15:04", clock)
	if err != nil {
		return time.Time{}, fmt.Errorf("-hold: %q is not N@HH:MM: %w", hold, err)
	}
	if n < size {
		return time.Time{}, nil
	}
	now = now.UTC()
	start := time.Date(now.Year(), now.Month(), now.Day(), at.Hour(), at.Minute(), 0, 0, time.UTC)
	if start.Before(now.Add(-12 * time.Hour)) {
		start = start.Add(24 * time.Hour)
	}
	return start, nil
}

func afterBinary(ref string) (fleet.Binary, error) {
	if ref != "" {
		return fleet.BinaryAt("after", ref)
	}
	b, err := fleet.CurrentBinary("after")
	if err != nil {
		return b, err
	}
	// The bench is run from the repo root by make; record the path relative to it when possible.
	if wd, err := os.Getwd(); err == nil {
		if rel, err := filepath.Rel(wd, b.Path); err == nil && !strings.HasPrefix(rel, "..") {
			b.Path = rel
		}
	}
	return b, nil
}

// rerender prints a results file's tables with this version of the report and rewrites the .md
// beside it (the JSON holds every figure; the markdown is derived from it).
func rerender(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var rep fleet.Report
	if err := json.Unmarshal(data, &rep); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	md, err := os.Create(strings.TrimSuffix(path, ".json") + ".md")
	if err != nil {
		return err
	}
	defer md.Close()
	rep.Markdown(io.MultiWriter(os.Stdout, md))
	return md.Close()
}
