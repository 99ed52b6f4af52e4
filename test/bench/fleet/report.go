package fleet

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/etcd-conductor/etcd-conductor/test/bench/report"
)

// Report is one `make bench-fleet`: every fleet size, each measured for every binary.
type Report struct {
	Started  time.Time      `json:"started"`
	Finished time.Time      `json:"finished"`
	Machine  report.Machine `json:"machine"`
	Binaries []Binary       `json:"binaries"`
	// Sizes holds, per fleet size, one Result per binary in Binaries order.
	Sizes []SizeResults `json:"sizes"`
	// Rollouts is the fleet-wide image bump of real members, one per binary.
	Rollouts []RolloutResult `json:"rollouts,omitempty"`
}

// SizeResults are one fleet size's runs.
type SizeResults struct {
	N       int      `json:"n"`
	Results []Result `json:"results"`
	// Failed holds, per binary label, why its run did not finish (its partial figures are in
	// Results).
	Failed map[string]string `json:"failed,omitempty"`
}

// Targets are issue 15's figures for a fleet of 1,000 Etcds.
var Targets = struct {
	RestartSeconds, WritesPerUnchangedEtcd, RSSBytes, P99Seconds float64
}{RestartSeconds: 30, WritesPerUnchangedEtcd: 0, RSSBytes: 300 << 20, P99Seconds: 0.1}

// WriteFiles writes fleet-<date>.md and fleet-<date>.json into dir and returns the markdown path.
func (r Report) WriteFiles(dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	base := filepath.Join(dir, "fleet-"+r.Started.UTC().Format("2006-01-02T1504"))
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(base+".json", append(data, '\n'), 0o644); err != nil {
		return "", err
	}
	f, err := os.Create(base + ".md")
	if err != nil {
		return "", err
	}
	defer f.Close()
	r.Markdown(f)
	return base + ".md", f.Close()
}

// Markdown prints the side-by-side tables.
func (r Report) Markdown(w io.Writer) {
	fmt.Fprintf(w, "# Fleet benchmark %s\n\n", r.Started.UTC().Format("2006-01-02 15:04 UTC"))
	m := r.Machine
	fmt.Fprintf(w, "Machine: %d CPUs (%s), %.0f GiB, %s; load average %.1f at start, %.1f at end. %s\n\n",
		m.CPUs, m.CPUModel, m.MemoryGiB, m.GoVersion, m.LoadAtStart, m.LoadAtEnd, m.Note)
	for _, b := range r.Binaries {
		ref := b.Ref
		if ref == "" {
			ref = "current tree"
		}
		fmt.Fprintf(w, "- **%s**: %s (%s) `%s`\n", b.Label, ref, shortCommit(b.Commit), b.Path)
	}
	fmt.Fprintln(w)
	for _, size := range r.Sizes {
		writeSize(w, size)
	}
	writeRollouts(w, r.Rollouts)
}

func writeRollouts(w io.Writer, rollouts []RolloutResult) {
	if len(rollouts) == 0 {
		return
	}
	first := rollouts[0]
	fmt.Fprintf(w, "## Fleet-wide image bump of real members: %d clusters of %d (node simulator, mTLS, etcd %s → %s)\n\n",
		first.Clusters, first.Replicas, etcdVersion, bumpVersion)
	fmt.Fprintln(w, "| | last rollout started (s) | every rollout started (s, per cluster) | all members updated and ready (s) |")
	fmt.Fprintln(w, "|---|---|---|---|")
	for _, r := range rollouts {
		per := make([]string, len(r.StartSeconds))
		for i, v := range r.StartSeconds {
			per[i] = fmt.Sprintf("%.1f", v)
		}
		done := timed(r.AllConvergedSeconds, r.TimedOut)
		if r.Error != "" && !r.TimedOut {
			done = "failed: " + r.Error
		}
		fmt.Fprintf(w, "| %s | %.1f | %s | %s |\n", r.Binary.Label, r.LastStartSeconds, strings.Join(per, ", "), done)
	}
	fmt.Fprintln(w)
}

func shortCommit(c string) string {
	// A full hash, possibly followed by "+worktree".
	if len(c) >= 40 {
		return c[:12] + c[40:]
	}
	return c
}

func writeSize(w io.Writer, size SizeResults) {
	// A binary whose run ended before it measured anything has a failure line, not a column
	// of zeros.
	var res []Result
	for _, r := range size.Results {
		if _, failed := size.Failed[r.Binary.Label]; failed && r.Converge.Seconds == 0 {
			continue
		}
		res = append(res, r)
	}
	if len(res) == 0 {
		fmt.Fprintf(w, "## %d Etcds\n\n", size.N)
		for label, why := range size.Failed {
			fmt.Fprintf(w, "**%s did not finish**: %s\n\n", label, why)
		}
		return
	}
	first := res[0]
	pods := "Pending pods (kube-controller-manager's StatefulSet controller, no kubelet)"
	if !first.Pods {
		pods = "no pods (no kube-controller-manager)"
	}
	fmt.Fprintf(w, "## %d Etcds of %d members — %s\n\n", size.N, first.Replicas, pods)
	header := "| | "
	sep := "|---|"
	for _, r := range res {
		header += r.Binary.Label + " | "
		sep += "---|"
	}
	fmt.Fprintln(w, strings.TrimSpace(header))
	fmt.Fprintln(w, sep)
	n := float64(size.N)
	row := func(name string, f func(Result) string) {
		line := "| " + name + " |"
		for _, r := range res {
			line += " " + f(r) + " |"
		}
		fmt.Fprintln(w, line)
	}
	// restartRow shows a restart figure only for a binary that got as far as restarting.
	restartRow := func(name string, f func(Result) string) {
		row(name, func(r Result) string {
			if r.Restart.Seconds == 0 {
				return "–"
			}
			return f(r)
		})
	}
	row("converged from creation (s)", func(r Result) string {
		if r.Converge.TimedOut {
			return fmt.Sprintf("> %.0f (timed out: %d of %d converged)", r.Converge.Seconds, r.Converge.Converged, size.N)
		}
		return timed(r.Converge.Seconds, false)
	})
	restartRow("restart → all reconciled (s)", func(r Result) string { return timed(r.Restart.Seconds, r.Restart.TimedOut) })
	restartRow("writes per Etcd per restart", func(r Result) string { return fmt.Sprintf("%.2f (%.0f)", r.Restart.Writes/n, r.Restart.Writes) })
	restartRow("the manager's own write requests over the restart (client-go)", func(r Result) string { return fmt.Sprintf("%.0f", r.Restart.ManagerWrites) })
	restartRow("reads per Etcd per restart (no WATCH)", func(r Result) string { return fmt.Sprintf("%.2f (%.0f)", r.Restart.Reads/n, r.Restart.Reads) })
	restartRow("manager RSS at the end / peak (MB)", func(r Result) string {
		return fmt.Sprintf("%d / %d", r.Restart.Proc.RSSBytes>>20, r.Restart.Proc.PeakRSSBytes>>20)
	})
	restartRow("manager CPU over the restart (s)", func(r Result) string { return fmt.Sprintf("%.1f", r.Restart.Proc.CPUSeconds) })
	restartRow("reconcile p50 / p99, all controllers, start → all reconciled (ms) [share ≤ 100 ms]", func(r Result) string {
		return reconcileCell(r.Restart.AllReconciles, false)
	})
	restartRow("reconcile p50 / p99, all controllers, in the seconds after (ms) [share ≤ 100 ms]", func(r Result) string {
		if r.Restart.SteadySeconds == 0 {
			return "–"
		}
		return fmt.Sprintf("%.0f s: %s", r.Restart.SteadySeconds, reconcileCell(r.Restart.Steady, true))
	})
	for _, c := range controllerNames(res) {
		restartRow(fmt.Sprintf("%s: reconciles over the restart, p50 / p99 (ms)", c), func(r Result) string {
			s, ok := r.Restart.Reconciles[c]
			if !ok {
				return "–"
			}
			return fmt.Sprintf("%.0f, %s / %s", s.Count, ms(s.P50Seconds), ms(s.P99Seconds))
		})
	}
	restartRow("Etcds written during the restart", func(r Result) string { return fmt.Sprintf("%d", r.Restart.ChangedEtcds) })
	row("Etcds still written after pods and etcd queue settled, before the restart", func(r Result) string {
		if r.Converge.SettledSeconds == 0 {
			return "–"
		}
		return fmt.Sprintf("%d", r.Converge.LateEtcds)
	})
	restartRow("goroutines", func(r Result) string { return fmt.Sprintf("%.0f", r.Restart.Goroutines) })
	restartRow("open member connections", func(r Result) string {
		if r.Restart.MemberClients == nil {
			return "not exported"
		}
		return fmt.Sprintf("%.0f", *r.Restart.MemberClients)
	})
	row("image bump during a restart: acted on after (s)", func(r Result) string {
		if r.Bump == nil {
			return "–"
		}
		return fmt.Sprintf("%s (queue %.0f deep)", timed(r.Bump.ActedSeconds, r.Bump.TimedOut), r.Bump.QueueDepth)
	})
	row("load average start → end", func(r Result) string { return fmt.Sprintf("%.1f → %.1f", r.LoadStart, r.LoadEnd) })
	for _, r := range res {
		if !r.Converge.Quiet && r.Restart.Seconds > 0 {
			fmt.Fprintf(w, "\n%s: Etcds were still being written %s after the fleet converged; its restart started anyway.\n", r.Binary.Label, quietLimit)
		}
	}
	for _, r := range res {
		if len(r.Restart.ChangedFields) == 0 {
			continue
		}
		fields := make([]string, 0, len(r.Restart.ChangedFields))
		for f, n := range r.Restart.ChangedFields {
			fields = append(fields, fmt.Sprintf("`%s` %d", f, n))
		}
		sort.Strings(fields)
		fmt.Fprintf(w, "\n%s: fields written during the restart (writes): %s.\n", r.Binary.Label, strings.Join(fields, ", "))
	}
	for label, why := range size.Failed {
		fmt.Fprintf(w, "\n**%s did not finish**: %s\n", label, why)
	}
	fmt.Fprintf(w, "\nReconcile times are controller-runtime's controller_runtime_reconcile_time_seconds (the Reconcile call and the requeue that follows it, "+
		"not the time an item waits in the queue), of every controller, from the restarted manager's start until each controller has reconciled every Etcd "+
		"once, and separately over the seconds after (the periodic checks of a settled fleet). p50/p99 are interpolated within the histogram's buckets (5, 10, 25, 50, 100, 150, 200 ms, …): "+
		"a p50 under 5 ms reads as about 2.5 ms whatever it is. The share ≤ 100 ms is exact (100 ms is a bucket bound): p99 < 100 ms holds when it is at least 99 %%.\n")
	fmt.Fprintf(w, "\nRequests per Etcd per restart, from kube-apiserver's apiserver_request_total over the restart less its idle rate. "+
		"The tokenreviews/subjectaccessreviews rows are the benchmark's own scrapes of the manager's metrics. "+
		"WATCH is left out (in the JSON): the apiserver counts a watch when it ends, so the rows are other clients' watches timing out, "+
		"and client-go's informers list through a streaming WATCH, so a manager's start-up lists do not show here at all.\n\n")
	fmt.Fprintln(w, strings.TrimSpace(header))
	fmt.Fprintln(w, sep)
	keys := map[RequestKey]bool{}
	for _, r := range res {
		for _, c := range r.Restart.Requests {
			if c.Verb != "WATCH" {
				keys[c.RequestKey] = true
			}
		}
	}
	sorted := make([]RequestKey, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Slice(sorted, func(i, j int) bool {
		if sorted[i].IsWrite() != sorted[j].IsWrite() {
			return sorted[i].IsWrite()
		}
		return sorted[i].String() < sorted[j].String()
	})
	for _, k := range sorted {
		row("`"+k.String()+"`", func(r Result) string {
			for _, c := range r.Restart.Requests {
				if c.RequestKey == k {
					return fmt.Sprintf("%.2f (%.0f)", c.Count/n, c.Count)
				}
			}
			return "0"
		})
	}
	if size.N >= 1000 {
		fmt.Fprintln(w)
		for _, r := range res {
			if r.Restart.Seconds == 0 {
				fmt.Fprintf(w, "- %s against issue 15's targets at %d Etcds: not measured (no restart)\n", r.Binary.Label, size.N)
				continue
			}
			fmt.Fprintf(w, "- %s against issue 15's targets at %d Etcds: %s\n", r.Binary.Label, size.N, strings.Join(targetVerdicts(r), "; "))
		}
	}
	fmt.Fprintln(w)
}

// targetVerdicts says, per target, whether r met it. Writes are counted for the whole fleet:
// nothing changed, so every write is one an unchanged cluster cost.
func targetVerdicts(r Result) []string {
	verdict := func(ok bool) string {
		if ok {
			return "met"
		}
		return "NOT met"
	}
	return []string{
		fmt.Sprintf("restart ≤ %.0f s: %s (%.1f s)", Targets.RestartSeconds, verdict(!r.Restart.TimedOut && r.Restart.Seconds <= Targets.RestartSeconds), r.Restart.Seconds),
		fmt.Sprintf("0 writes for unchanged clusters: %s (%.0f sent by the manager, %d Etcds changed; apiserver count less idle rate %.1f)",
			verdict(r.Restart.ManagerWrites == 0 && r.Restart.ChangedEtcds == 0), r.Restart.ManagerWrites, r.Restart.ChangedEtcds, r.Restart.Writes),
		fmt.Sprintf("RSS < 300 MB: %s (%d MB)", verdict(float64(r.Restart.Proc.RSSBytes) < Targets.RSSBytes), r.Restart.Proc.RSSBytes>>20),
		fmt.Sprintf("p99 reconcile < 100 ms: %s (%.2f %% of reconciles ≤ 100 ms; p99 ≈ %s ms)", verdict(r.Restart.AllReconciles.Within100ms >= 0.99),
			100*r.Restart.AllReconciles.Within100ms, ms(r.Restart.AllReconciles.P99Seconds)),
	}
}

func controllerNames(res []Result) []string {
	seen := map[string]bool{}
	for _, r := range res {
		for c := range r.Restart.Reconciles {
			seen[c] = true
		}
	}
	return slices.Sorted(maps.Keys(seen))
}

// reconcileCell is "p50 / p99 [share ≤ 100 ms]", with the count when withCount.
func reconcileCell(s ReconcileStats, withCount bool) string {
	cell := fmt.Sprintf("%s / %s [%.1f %%]", ms(s.P50Seconds), ms(s.P99Seconds), 100*s.Within100ms)
	if withCount {
		cell = fmt.Sprintf("%.0f, %s", s.Count, cell)
	}
	return cell
}

func timed(seconds float64, timedOut bool) string {
	if timedOut {
		return fmt.Sprintf("> %.0f (timed out)", seconds)
	}
	return fmt.Sprintf("%.1f", seconds)
}

func ms(seconds float64) string {
	if math.IsNaN(seconds) {
		return "–"
	}
	return fmt.Sprintf("%.1f", seconds*1000)
}
