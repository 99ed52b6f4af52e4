// Command fleetbench runs the fleet benchmark (`make bench-fleet`): for each fleet size, the
// manager built from a git ref ("before") and the current tree's bin/etcd-conductor ("after"),
// each on a fresh local control plane, side by side in one table.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/etcd-conductor/etcd-conductor/test/bench/fleet"
	"github.com/etcd-conductor/etcd-conductor/test/bench/report"
)

func main() {
	sizes := flag.String("n", "100,300", "fleet sizes, comma-separated")
	before := flag.String("before", "a25b047", "git ref of the \"before\" manager (built and cached by commit); empty skips it")
	after := flag.String("after", "", "git ref of the \"after\" manager; empty: the current tree's bin/etcd-conductor")
	afterConfig := flag.String("after-config", "", "OperatorConfiguration fields (YAML) only the \"after\" binary knows, e.g. 'clientConnection: {qps: 100, burst: 200}'")
	replicas := flag.Int("replicas", 3, "members per Etcd")
	perNamespace := flag.Int("per-namespace", 10, "Etcds per namespace")
	noKCM := flag.Bool("no-controller-manager", false, "run no kube-controller-manager: StatefulSets get no pods")
	bump := flag.Bool("bump", true, "also measure a restart during which one Etcd's image changes")
	gates := flag.String("feature-gates", "QuorumAwareUpdatesWithOnDelete=true", "manager feature gates, name=bool,...")
	out := flag.String("out", "test/bench/results", "directory for fleet-<date>.md and .json")
	note := flag.String("note", "shared 2-core machine (6 engineers building and testing): figures are noisy", "a line for the results header")
	flag.Parse()
	if err := run(*sizes, *before, *after, *afterConfig, *replicas, *perNamespace, *noKCM, *bump, *gates, *out, *note); err != nil {
		fmt.Fprintf(os.Stderr, "fleetbench: %v\n", err)
		os.Exit(1)
	}
}

func run(sizesFlag, beforeRef, afterRef, afterConfig string, replicas, perNamespace int, noKCM, bump bool, gatesFlag, out, note string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var sizes []int
	for _, s := range strings.Split(sizesFlag, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
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
	}
	for _, n := range sizes {
		size := fleet.SizeResults{N: n}
		for _, b := range binaries {
			opts.N = n
			res, err := fleet.Run(ctx, b, opts)
			if err != nil {
				fmt.Printf("%s at N=%d did not finish: %v\n", b.Label, n, err)
				if size.Failed == nil {
					size.Failed = map[string]string{}
				}
				size.Failed[b.Label] = err.Error()
			}
			size.Results = append(size.Results, res)
			if ctx.Err() != nil {
				break
			}
		}
		rep.Sizes = append(rep.Sizes, size)
		if ctx.Err() != nil {
			break
		}
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
