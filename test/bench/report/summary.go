package report

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/etcd-conductor/etcd-conductor/test/figures"
)

// Ratio is a/b of two medians, or false when it means nothing (a missing side, or b zero).
func Ratio(a, b figures.Stat) (float64, bool) {
	if a.N == 0 || b.N == 0 || b.Median == 0 {
		return 0, false
	}
	return a.Median / b.Median, true
}

// figure picks one number out of a run.
type figure struct {
	title string
	value func(Run) float64
	// format renders one value; ratio says whether the column gets a ×RU column.
	format func(float64) string
	ratio  bool
}

var columns = []figure{
	{"rollout s", func(r Run) float64 { return r.RolloutSeconds }, func(v float64) string { return fmt.Sprintf("%.1f", v) }, true},
	{"leader changes", func(r Run) float64 { return float64(r.LeaderChanges) }, intFormat, false},
	{"quorum loss ms (refusals)", func(r Run) float64 { return float64(r.QuorumLossMs) }, intFormat, false},
	{"unconfirmed ms (probe timeouts)", func(r Run) float64 { return float64(r.QuorumUnconfirmedMs) }, intFormat, false},
	{"failed writes: timeouts", func(r Run) float64 { return float64(r.WriteTimeouts) }, intFormat, false},
	{"failed writes: refusals", func(r Run) float64 { return float64(r.WriteRefusals) }, intFormat, false},
	{"write gap at leader step ms", func(r Run) float64 { return float64(r.LeaderStepGapMs) }, intFormat, false},
	{"idle jitter ms", func(r Run) float64 { return float64(r.IdleJitterMs) }, intFormat, false},
	{"step gap ≤ 3× jitter", nil, nil, false}, // rendered specially: runs that pass
	{"longest write gap ms", func(r Run) float64 { return float64(r.LongestWriteGapMs) }, intFormat, false},
	{"lost acked writes", func(r Run) float64 { return float64(r.LostAckedWrites) }, intFormat, false},
	{"deletions (participating)", nil, nil, false}, // rendered specially
}

// stepWithinJitter is the proof's bound: the write gap at the leader step within three times
// the idle jitter of the same run.
func stepWithinJitter(r Run) bool { return r.LeaderStepGapMs <= 3*r.IdleJitterMs }

func intFormat(v float64) string {
	if v == math.Trunc(v) {
		return fmt.Sprintf("%d", int64(v))
	}
	return fmt.Sprintf("%.1f", v)
}

// Strategies in table order; Scenarios likewise. Ids not listed sort after, alphabetically.
var (
	Strategies = []string{StrategyRollingUpdate, StrategyRollingUpdateMaxUnavailable, StrategyOnDeleteLease, StrategyOnDeleteDirect, StrategyOnDeleteConcurrent}
	Scenarios  = []string{"3-healthy", "3-one-dead", "3-stale-role", "5-healthy", "5-one-dead", "5-stale-role",
		"7-healthy", "7-one-dead", "7-stale-role", "3-one-hung", "3-one-partitioned"}
)

// Markdown renders the summary: one row per scenario × strategy with median (min–max) over the
// completed runs, each figure's ratio to RollingUpdate's median, then the runs that did not
// complete and the stale-role count.
func Markdown(r Results) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Rollout benchmark: image bump %s → %s\n\n", r.Settings.FromImage, r.Settings.ToImage)
	fmt.Fprintf(&b, "Run %s on %s; %d repetition(s), %d runs, %.0f s wall clock.\n", r.Date, r.Machine, r.Reps, len(r.Runs), r.WallSeconds)
	fmt.Fprintf(&b, "Writer %.0f Puts/s with a %d ms deadline per attempt; quorum probed with %s. "+
		"A rollout with no progress for %.0f s (no pod updated or becoming ready, none terminating), or not done in %.0f s, counts as not completed.\n\n",
		r.Settings.WriteRate, r.Settings.WriteTimeoutMs, r.Settings.QuorumProbe, r.Settings.StallSeconds, r.Settings.TimeoutSeconds)
	fmt.Fprintf(&b, "Each run: the fault is injected, the instruments start once it has settled (a stable leader a quorum agrees on), "+
		"then %.0f s with no rollout (the idle baseline: its longest write gap is the run's idle jitter), then the bump. "+
		"Quorum loss counts only rounds the members' own refusals prove (not ready, no leader, refused); rounds unconfirmed only because "+
		"probes hit the client's %d ms deadline are the separate timeout column; a probe answered \"leader changed\" is asked again once, as clientv3 does. "+
		"The write gap at the leader step is the longest gap between acknowledgements overlapping a leader change: from the first sign the old leader "+
		"was going (it stopped answering, or a member following it reported another leader or none), less one 100 ms leader poll, to the new term's first sighting.\n\n", r.Settings.IdleBaselineSeconds, r.Settings.WriteTimeoutMs)
	b.WriteString("Cells: median (min–max) over the completed runs; ×RU: ratio of the medians to `rolling-update` in the same scenario " +
		"(— when either side is missing or RollingUpdate's median is 0).\n\n")
	b.WriteString(Table(r.Runs))
	if proof := ProofTable(r.Runs); proof != "" {
		b.WriteString("\n## Against the proof's bounds (ours)\n\n")
		b.WriteString("Runs of ours that met each bound, over all runs (completed or not); the rollout ratio is the median " +
			"against `rolling-update`'s (bound: ≤ 0.6× at 5 members and ≤ 0.5× at 7 with concurrency).\n\n")
		b.WriteString(proof)
	}
	b.WriteString("\n## Every run\n\n")
	b.WriteString(RunsTable(r.Runs))

	if stuck := incomplete(r.Runs); len(stuck) > 0 {
		b.WriteString("\nRuns that did not complete:\n\n")
		for _, run := range stuck {
			fmt.Fprintf(&b, "- %s / %s rep %d after %.0f s: %s\n", run.Scenario, run.Strategy, run.Rep, run.RolloutSeconds, run.Note)
		}
	}
	if stale := StaleRoleTable(r.Runs); stale != "" {
		fmt.Fprintf(&b, "\n## Stale roles\n\nMember leases renewed every %s (valid 15 s); leadership moved to the follower the controller "+
			"would pick first, right after that member renewed its lease, then the image bumped.\n\n", r.Settings.StaleRoleLeaseRenewal)
		b.WriteString(stale)
	}
	return b.String()
}

type key struct{ scenario, strategy string }

func group(runs []Run) (map[key][]Run, []key) {
	groups := map[key][]Run{}
	var keys []key
	for _, run := range runs {
		k := key{run.Scenario, run.Strategy}
		if _, ok := groups[k]; !ok {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], run)
	}
	sort.SliceStable(keys, func(i, j int) bool {
		if a, b := orderOf(Scenarios, keys[i].scenario), orderOf(Scenarios, keys[j].scenario); a != b {
			return a < b
		}
		if keys[i].scenario != keys[j].scenario {
			return keys[i].scenario < keys[j].scenario
		}
		if a, b := orderOf(Strategies, keys[i].strategy), orderOf(Strategies, keys[j].strategy); a != b {
			return a < b
		}
		return keys[i].strategy < keys[j].strategy
	})
	return groups, keys
}

func orderOf(list []string, id string) int {
	for i, s := range list {
		if s == id {
			return i
		}
	}
	return len(list)
}

func completed(runs []Run) []Run {
	var out []Run
	for _, r := range runs {
		if r.Completed {
			out = append(out, r)
		}
	}
	return out
}

func incomplete(runs []Run) []Run {
	groups, keys := group(runs)
	var out []Run
	for _, k := range keys {
		for _, r := range groups[k] {
			if !r.Completed {
				out = append(out, r)
			}
		}
	}
	return out
}

func stat(runs []Run, value func(Run) float64) figures.Stat {
	values := make([]float64, 0, len(runs))
	for _, r := range runs {
		values = append(values, value(r))
	}
	return figures.Summarize(values)
}

func cell(s figures.Stat, format func(float64) string) string {
	if s.N == 0 {
		return "—"
	}
	if s.Min == s.Max {
		return format(s.Median)
	}
	return fmt.Sprintf("%s (%s–%s)", format(s.Median), format(s.Min), format(s.Max))
}

func ratioCell(a, b figures.Stat) string {
	q, ok := Ratio(a, b)
	if !ok {
		return "—"
	}
	return fmt.Sprintf("%.2f×", q)
}

// Table is the markdown table of every scenario × strategy in runs.
func Table(runs []Run) string {
	groups, keys := group(runs)
	var b strings.Builder
	header := []string{"scenario", "strategy", "completed"}
	for _, f := range columns {
		header = append(header, f.title)
		if f.ratio {
			header = append(header, "×RU")
		}
	}
	b.WriteString("| " + strings.Join(header, " | ") + " |\n")
	b.WriteString("|" + strings.Repeat("---|", len(header)) + "\n")
	for _, k := range keys {
		done := completed(groups[k])
		baseline := completed(groups[key{k.scenario, StrategyRollingUpdate}])
		row := []string{k.scenario, "`" + k.strategy + "`", fmt.Sprintf("%d/%d", len(done), len(groups[k]))}
		for _, f := range columns {
			if f.value == nil && f.title == "step gap ≤ 3× jitter" {
				n := 0
				for _, r := range done {
					if stepWithinJitter(r) {
						n++
					}
				}
				row = append(row, fmt.Sprintf("%d/%d", n, len(done)))
				continue
			}
			if f.value == nil {
				row = append(row, cell(stat(done, func(r Run) float64 { return float64(r.Deletions) }), intFormat)+
					" ("+cell(stat(done, func(r Run) float64 { return float64(r.ParticipatingDeletions) }), intFormat)+")")
				continue
			}
			s := stat(done, f.value)
			row = append(row, cell(s, f.format))
			if f.ratio {
				row = append(row, ratioCell(s, stat(baseline, f.value)))
			}
		}
		b.WriteString("| " + strings.Join(row, " | ") + " |\n")
	}
	return b.String()
}

// StaleRoleTable counts, per strategy, how often the stale-role runs deleted the current leader
// while a follower remained; empty when there are no such runs.
func StaleRoleTable(runs []Run) string {
	groups, keys := group(runs)
	var b strings.Builder
	for _, k := range keys {
		if !IsStaleRole(k.scenario) {
			continue
		}
		if b.Len() == 0 {
			b.WriteString("| scenario | strategy | runs | leader deleted while followers remained (total) | per run | deletions |\n|---|---|---|---|---|---|\n")
		}
		total, measured := 0, 0
		var perRun, deletions []string
		for _, r := range groups[k] {
			deletions = append(deletions, fmt.Sprintf("%d", r.Deletions))
			if r.LeaderDeletedWhileFollowersRemained == nil {
				perRun = append(perRun, "?")
				continue
			}
			measured++
			total += *r.LeaderDeletedWhileFollowersRemained
			perRun = append(perRun, fmt.Sprintf("%d", *r.LeaderDeletedWhileFollowersRemained))
		}
		fmt.Fprintf(&b, "| %s | `%s` | %d | %d | %s | %s |\n", k.scenario, k.strategy, len(groups[k]), total, strings.Join(perRun, ", "), strings.Join(deletions, ", "))
	}
	return b.String()
}

// RunsTable lists every run with its own figures, in the order they ran, so the spread behind
// each median can be read run by run.
func RunsTable(runs []Run) string {
	var b strings.Builder
	b.WriteString("| scenario | strategy | rep | completed | rollout s | leader changes | quorum loss ms | unconfirmed ms | write timeouts | write refusals | gap at leader step ms | idle jitter ms | ≤ 3× | longest gap ms | note |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range runs {
		within := "no"
		if stepWithinJitter(r) {
			within = "yes"
		}
		fmt.Fprintf(&b, "| %s | `%s` | %d | %v | %.1f | %d | %d | %d | %d | %d | %d | %d | %s | %d | %s |\n",
			r.Scenario, r.Strategy, r.Rep, r.Completed, r.RolloutSeconds, r.LeaderChanges, r.QuorumLossMs, r.QuorumUnconfirmedMs,
			r.WriteTimeouts, r.WriteRefusals, r.LeaderStepGapMs, r.IdleJitterMs, within, r.LongestWriteGapMs, strings.ReplaceAll(r.Note, "|", "/"))
	}
	return b.String()
}

// ProofTable counts, for each scenario × strategy of ours, the runs with exactly one leader
// change, with no quorum loss proven by refusals, and with the write gap at the leader step within
// 3× the run's idle jitter, and gives the rollout time's ratio to RollingUpdate.
func ProofTable(runs []Run) string {
	groups, keys := group(runs)
	var b strings.Builder
	for _, k := range keys {
		if !Ours(k.strategy) {
			continue
		}
		if b.Len() == 0 {
			b.WriteString("| scenario | strategy | runs | exactly 1 leader change | 0 ms quorum loss | step gap ≤ 3× jitter | rollout ×RU |\n|---|---|---|---|---|---|---|\n")
		}
		all := groups[k]
		count := func(ok func(Run) bool) string {
			n := 0
			for _, r := range all {
				if ok(r) {
					n++
				}
			}
			return fmt.Sprintf("%d/%d", n, len(all))
		}
		rollout := func(r Run) float64 { return r.RolloutSeconds }
		ratio := ratioCell(stat(completed(all), rollout), stat(completed(groups[key{k.scenario, StrategyRollingUpdate}]), rollout))
		fmt.Fprintf(&b, "| %s | `%s` | %d | %s | %s | %s | %s |\n", k.scenario, k.strategy, len(all),
			count(func(r Run) bool { return r.LeaderChanges == 1 }), count(func(r Run) bool { return r.QuorumLossMs == 0 }),
			count(stepWithinJitter), ratio)
	}
	return b.String()
}
