package workload

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

const (
	// DefaultCheckTimeout bounds the linearizability check. Partitioned by key, a run of minutes
	// checks in milliseconds; the bound is there for a history porcupine finds hard (many
	// unknown Puts on one key), which then ends Unknown rather than hanging the test.
	DefaultCheckTimeout = 30 * time.Second
	// HistoryDirEnv names the directory the HTML visualization of an illegal key is written to
	// (default: the system's temporary directory, which outlives the test's own).
	HistoryDirEnv = "ETCD_CONDUCTOR_HISTORY_DIR"
	// maxOpsInError bounds the operations an error lists; the visualization has them all.
	maxOpsInError = 30
)

// Verdict is the linearizability check's answer.
type Verdict string

const (
	VerdictOK      Verdict = "ok"
	VerdictIllegal Verdict = "illegal"
	// VerdictUnknown: the check did not finish within its timeout. It is not a pass.
	VerdictUnknown Verdict = "unknown"
)

// CheckOptions tunes CheckHistory. Zero values take the defaults.
type CheckOptions struct {
	// Timeout bounds the check (DefaultCheckTimeout).
	Timeout time.Duration
	// Exclude are keys left out of the check: writes the scenario loses by design (a restore
	// from backup loses what was acknowledged after the last delta snapshot), which reads may
	// have seen before the loss. Nothing else may be excluded.
	Exclude map[string]bool
	// VisualizeDir receives porcupine's HTML visualization of the first illegal key (default:
	// $ETCD_CONDUCTOR_HISTORY_DIR, else os.TempDir()).
	VisualizeDir string
}

func (o CheckOptions) withDefaults() CheckOptions {
	if o.Timeout <= 0 {
		o.Timeout = DefaultCheckTimeout
	}
	if o.VisualizeDir == "" {
		o.VisualizeDir = os.Getenv(HistoryDirEnv)
	}
	if o.VisualizeDir == "" {
		o.VisualizeDir = os.TempDir()
	}
	return o
}

// LinearizabilityResult is what the check of one history found.
type LinearizabilityResult struct {
	Verdict Verdict `json:"verdict"`
	// Operations is how many were checked: Puts that may have taken effect and reads that
	// returned, on keys not excluded.
	Operations   int `json:"operations"`
	Puts         int `json:"puts"`
	Reads        int `json:"reads"`
	Keys         int `json:"keys"`
	ExcludedKeys int `json:"excludedKeys,omitempty"`
	// IllegalKeys counts the keys whose history is not linearizable (when Verdict is illegal).
	IllegalKeys int     `json:"illegalKeys,omitempty"`
	CheckMs     float64 `json:"checkMs"`
	// Visualization is the HTML file showing the first illegal key, when one could be written.
	Visualization string `json:"visualization,omitempty"`
}

// Summary is the result on one line.
func (r LinearizabilityResult) Summary() string {
	return fmt.Sprintf("linearizable=%s (%d ops: %d puts, %d reads on %d keys, %d excluded; checked in %.1fms)",
		r.Verdict, r.Operations, r.Puts, r.Reads, r.Keys, r.ExcludedKeys, r.CheckMs)
}

// CheckHistory checks that the history is linearizable, key by key, within o.Timeout. The error
// is set unless the verdict is ok: for an illegal history it names the first illegal key (by
// first call) and lists its operations with their members and times; an unknown verdict (the
// timeout) is an error too, since nothing was shown.
func CheckHistory(h History, o CheckOptions) (LinearizabilityResult, error) {
	o = o.withDefaults()
	started := time.Now()
	ops, res := toOperations(h, o.Exclude)
	verdict := porcupine.CheckOperationsTimeout(registerModel, ops, o.Timeout)
	res.CheckMs = msSince(started)
	switch verdict {
	case porcupine.Ok:
		res.Verdict = VerdictOK
		return res, nil
	case porcupine.Unknown:
		res.Verdict = VerdictUnknown
		return res, fmt.Errorf("linearizability check of %d operations on %d keys did not finish within %s: verdict unknown, not a pass",
			res.Operations, res.Keys, o.Timeout)
	}
	res.Verdict = VerdictIllegal
	err := explainIllegal(h, ops, o, started, &res)
	res.CheckMs = msSince(started)
	return res, err
}

// explainIllegal finds the illegal keys of a history porcupine judged illegal as a whole, and
// returns an error describing the first of them (by first call). Each key is checked again on
// its own, cheap since a key has a handful of operations.
func explainIllegal(h History, ops []porcupine.Operation, o CheckOptions, started time.Time, res *LinearizabilityResult) error {
	var first string
	var firstInfo porcupine.LinearizationInfo
	for _, part := range partitionByKey(ops) {
		left := o.Timeout - time.Since(started)
		if left <= 0 {
			break
		}
		verdict, info := porcupine.CheckOperationsVerbose(registerModel, part, left)
		if verdict != porcupine.Illegal {
			continue
		}
		res.IllegalKeys++
		if first == "" {
			first, firstInfo = part[0].Input.(kvInput).key, info
		}
	}
	if first == "" {
		// Porcupine said illegal, yet no key alone is within the time left: say so, not pass.
		return fmt.Errorf("history of %d operations on %d keys is not linearizable; no illegal key found within %s",
			res.Operations, res.Keys, o.Timeout)
	}
	var where string
	if path, err := visualize(o.VisualizeDir, first, firstInfo); err != nil {
		where = fmt.Sprintf(" (no visualization: %v)", err)
	} else {
		res.Visualization = path
		where = " (visualization: " + path + ")"
	}
	return fmt.Errorf("history not linearizable: %d of %d keys illegal; first, key %s%s:\n  %s",
		res.IllegalKeys, res.Keys, first, where, strings.Join(describeKey(h, first), "\n  "))
}

// toOperations turns the history into porcupine's operations, timed in nanoseconds from the
// first call. A Put of unknown outcome returns at the end of the history: it may have taken
// effect at any time after its call. Failed Puts and excluded keys are left out.
func toOperations(h History, exclude map[string]bool) ([]porcupine.Operation, LinearizabilityResult) {
	var res LinearizabilityResult
	var origin, end time.Time
	span := func(ts ...time.Time) {
		for _, t := range ts {
			if t.IsZero() {
				continue
			}
			if origin.IsZero() || t.Before(origin) {
				origin = t
			}
			if t.After(end) {
				end = t
			}
		}
	}
	excluded := map[string]bool{}
	for _, p := range h.Puts {
		if exclude[p.Key] {
			excluded[p.Key] = true
		} else if p.Outcome != OutcomeFailed {
			span(p.Call, p.Return)
		}
	}
	for _, r := range h.Reads {
		if exclude[r.Key] {
			excluded[r.Key] = true
		} else {
			span(r.Call, r.Return)
		}
	}
	at := func(t time.Time) int64 { return int64(t.Sub(origin)) }
	// One row per member in the visualization, the writer's Puts on row 0.
	clients := map[string]int{}
	client := func(member string) int {
		if _, ok := clients[member]; !ok {
			clients[member] = len(clients) + 1
		}
		return clients[member]
	}
	keys := map[string]bool{}
	ops := make([]porcupine.Operation, 0, len(h.Puts)+len(h.Reads))
	for _, p := range h.Puts {
		if exclude[p.Key] || p.Outcome == OutcomeFailed {
			continue
		}
		ret := at(end) + 1
		if p.Outcome == OutcomeOK {
			ret = at(p.Return)
		}
		ops = append(ops, porcupine.Operation{ClientId: 0, Input: kvInput{put: true, key: p.Key, value: p.Value},
			Call: at(p.Call), Return: ret, Metadata: opMeta{member: p.Member, outcome: p.Outcome}})
		keys[p.Key] = true
		res.Puts++
	}
	for _, r := range h.Reads {
		if exclude[r.Key] {
			continue
		}
		ops = append(ops, porcupine.Operation{ClientId: client(r.Member), Input: kvInput{key: r.Key},
			Output: register{found: r.Found, value: r.Value}, Call: at(r.Call), Return: at(r.Return), Metadata: opMeta{member: r.Member}})
		keys[r.Key] = true
		res.Reads++
	}
	res.Operations, res.Keys, res.ExcludedKeys = len(ops), len(keys), len(excluded)
	return ops, res
}

// describeKey lists the operations on key in the order of their calls, for an error message.
func describeKey(h History, key string) []string {
	type line struct {
		call time.Time
		text string
	}
	var lines []line
	for _, p := range h.Puts {
		if p.Key == key {
			lines = append(lines, line{p.Call, p.String()})
		}
	}
	for _, r := range h.Reads {
		if r.Key == key {
			lines = append(lines, line{r.Call, r.String()})
		}
	}
	sort.SliceStable(lines, func(i, j int) bool { return lines[i].call.Before(lines[j].call) })
	out := make([]string, 0, min(len(lines), maxOpsInError+1))
	for i, l := range lines {
		if i == maxOpsInError {
			out = append(out, fmt.Sprintf("... %d more", len(lines)-maxOpsInError))
			break
		}
		out = append(out, l.text)
	}
	return out
}

// visualize writes porcupine's HTML view of one key's history to dir and returns its path.
func visualize(dir, key string, info porcupine.LinearizationInfo) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("creating %s: %w", dir, err)
	}
	name := "linearizability-" + strings.NewReplacer("/", "_", "#", "_").Replace(strings.TrimPrefix(key, KeyPrefix)) + ".html"
	path := filepath.Join(dir, name)
	if err := porcupine.VisualizePath(registerModel, info, path); err != nil {
		return "", fmt.Errorf("writing %s: %w", path, err)
	}
	return path, nil
}

func msSince(t time.Time) float64 { return float64(time.Since(t).Microseconds()) / 1000 }
