// Command demo (`make demo`) shows what the quorum-aware rollout buys. On the local stack (real
// kube-apiserver and kube-controller-manager, the node simulator running real etcd members with
// mTLS) it installs the operator with its Helm chart, gate on, kills one member of a 3-member
// Etcd and bumps etcd 3.6.8 → 3.7.3 under a live view; then it does the same with the gate off
// (the StatefulSet's RollingUpdate) on a fresh Etcd, and prints both side by side. Everything it
// started is stopped on exit, also on Ctrl-C.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/term"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/etcd-conductor/etcd-conductor/test/framework"
	"github.com/etcd-conductor/etcd-conductor/test/helme2e"
	"github.com/etcd-conductor/etcd-conductor/test/localcluster"
	"github.com/etcd-conductor/etcd-conductor/test/stack"
)

const (
	fromVersion = "3.6.8"
	toVersion   = "3.7.3"
	// deadMember is the ordinal killed before each bump. RollingUpdate replaces the highest
	// ordinal first, so with the lowest one dead it takes a second member down at once.
	deadMember = 0
	// rollingUpdateTimeout bounds the contrast run: a RollingUpdate can wait for a member that
	// never becomes ready; the demo reports that instead of waiting forever.
	rollingUpdateTimeout = 2 * time.Minute
)

func main() {
	os.Exit(run())
}

func run() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctrl.SetLogger(logr.Discard())
	out := newScreen(os.Stdout)

	if err := checkEnvironment(); err != nil {
		fmt.Fprintf(os.Stderr, "demo: %v\n", err)
		return 1
	}
	started := time.Now()
	results, err := demo(ctx, out)
	if len(results) > 0 {
		printSummary(out, results)
	}
	if err != nil {
		if ctx.Err() != nil {
			fmt.Fprintln(os.Stderr, "demo: interrupted; everything it started has been stopped")
			return 130
		}
		fmt.Fprintf(os.Stderr, "demo: %v\n", err)
		return 1
	}
	out.linef("demo finished in %s; everything it started has been stopped", time.Since(started).Round(time.Second))
	return 0
}

// checkEnvironment says up front what `make tools` or root would fix.
func checkEnvironment() error {
	binDir, err := localcluster.DefaultBinDir()
	if err != nil {
		return err
	}
	if missing := localcluster.MissingBinaries(binDir); len(missing) > 0 {
		return fmt.Errorf("binaries %v missing in %s: run `make demo` (it runs `make tools` first)", missing, binDir)
	}
	if _, err := helme2e.HelmBinary(); err != nil {
		return err
	}
	if _, err := helme2e.OCIImages(); err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		return errors.New("the node simulator needs root (network namespaces for the pods)")
	}
	return nil
}

// demo runs both rollouts and returns what they measured, tearing everything down before it
// returns.
func demo(ctx context.Context, out *screen) (_ []result, err error) {
	out.linef("starting the local stack: kube-apiserver, kube-controller-manager, node simulator (builds etcd-conductor) ...")
	workDir, err := os.MkdirTemp("", "etcd-conductor-demo-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(workDir)
	t0 := time.Now()
	// The chart's image runs from make image's archive, as a node would run it.
	images, err := helme2e.OCIImages()
	if err != nil {
		return nil, err
	}
	s, err := stack.Start(ctx, stack.Options{WorkDir: filepath.Join(workDir, "stack"), OCIImages: images})
	if err != nil {
		return nil, fmt.Errorf("starting the stack: %w", err)
	}
	defer func() {
		out.linef("stopping the stack ...")
		if stopErr := s.Stop(); stopErr != nil {
			err = errors.Join(err, fmt.Errorf("stopping the stack: %w", stopErr))
		}
	}()
	out.linef("stack up in %s (kube-apiserver at %s)", time.Since(t0).Round(100*time.Millisecond), s.Cluster.ServerURL())

	out.linef("helm install %s charts/etcd-conductor --namespace %s --set featureGates.%s=true ...", helme2e.ReleaseName, helme2e.Namespace, helme2e.GateName)
	op, err := helme2e.Install(ctx, s, helme2e.InstallOptions{QuorumAware: true, WorkDir: filepath.Join(workDir, "helm")})
	if err != nil {
		return nil, fmt.Errorf("installing the operator: %w", err)
	}
	defer func() {
		// The release goes with the stack; only the extra controller process needs stopping.
		if stopErr := op.Stop(); stopErr != nil {
			err = errors.Join(err, fmt.Errorf("stopping the Deployment controllers: %w", stopErr))
		}
	}()
	if pod, perr := op.WaitManagerReady(ctx); perr == nil {
		out.linef("operator running as pod %s/%s on the simulated node, from image %s (make image's archive)", pod.Namespace, pod.Name, helme2e.ImageRef)
	}

	var results []result
	quorumAware, err := rollout(ctx, s, out, "quorum-aware", "demo-quorum-aware", 3*time.Minute)
	if quorumAware != nil {
		results = append(results, *quorumAware)
	}
	if err != nil {
		return results, err
	}
	// The first cluster has made its point; its members would only compete for the CPU.
	_ = s.Kube.CoreV1().Namespaces().Delete(ctx, "demo-quorum-aware", metav1.DeleteOptions{})

	out.linef("")
	out.linef("helm upgrade %s --reuse-values --set featureGates.%s=false (the manager pod rolls) ...", helme2e.ReleaseName, helme2e.GateName)
	if _, err := op.SetQuorumAware(ctx, false); err != nil {
		return results, fmt.Errorf("turning the gate off: %w", err)
	}
	rolling, err := rollout(ctx, s, out, "RollingUpdate", "demo-rolling-update", rollingUpdateTimeout)
	if rolling != nil {
		results = append(results, *rolling)
	}
	return results, err
}

// result is one column of the summary.
type result struct {
	title string
	run   *helme2e.RolloutResult
}

func rollout(ctx context.Context, s *stack.Stack, out *screen, title, namespace string, timeout time.Duration) (*result, error) {
	out.linef("")
	out.linef("=== %s: 3 members, kill %s-%d, bump etcd %s -> %s ===", title, "etcd", deadMember, fromVersion, toVersion)
	view := newLiveView(out, title)
	res, err := helme2e.RunRollout(ctx, s, helme2e.RolloutOptions{
		Namespace: namespace, Name: "etcd",
		From: framework.EtcdImage(fromVersion), To: framework.EtcdImage(toVersion),
		Dead: deadMember, Timeout: timeout,
		OnTick:   view.show,
		Progress: func(line string) { out.linef("  %s", line) },
	})
	view.finish()
	if res == nil {
		return nil, err
	}
	if !res.Completed && err == nil {
		out.linef("  %s did not complete within %s", title, timeout)
	} else if res.Completed {
		out.linef("  %s completed in %s", title, res.Duration.Round(100*time.Millisecond))
	}
	return &result{title: title, run: res}, err
}

// screen writes lines, redrawing a block in place when stdout is a terminal.
type screen struct {
	w     io.Writer
	fd    int
	tty   bool
	drawn int // lines of the live block currently on screen
}

func newScreen(f *os.File) *screen {
	fd := int(f.Fd())
	return &screen{w: f, fd: fd, tty: term.IsTerminal(fd)}
}

// width is the terminal's, read at every redraw so a resized window still gets whole lines: a
// wrapped line would throw off the cursor movement that replaces the block.
func (s *screen) width() int {
	if w, _, err := term.GetSize(s.fd); err == nil && w > 20 {
		return w
	}
	return 120
}

func (s *screen) linef(format string, args ...any) {
	s.drawn = 0 // the block above is history now
	fmt.Fprintf(s.w, format+"\n", args...)
}

// redraw replaces the live block with lines.
func (s *screen) redraw(lines []string) {
	var b strings.Builder
	if s.drawn > 0 {
		fmt.Fprintf(&b, "\x1b[%dA\x1b[J", s.drawn) // up to the block's first line, clear below
	}
	width := s.width()
	for _, l := range lines {
		b.WriteString(clip(l, width-1))
		b.WriteString("\x1b[K\n")
	}
	s.drawn = len(lines)
	io.WriteString(s.w, b.String())
}

// liveView renders frames: redrawn in place on a terminal, else one plain line whenever what
// it shows changes (and every few seconds for the write figures).
type liveView struct {
	out       *screen
	title     string
	lastKey   string
	lastPrint time.Time
	last      *helme2e.Frame
}

func newLiveView(out *screen, title string) *liveView { return &liveView{out: out, title: title} }

func (v *liveView) show(f helme2e.Frame) {
	v.last = &f
	if v.out.tty {
		v.out.redraw(v.block(f))
		return
	}
	key := podsLine(f) + "|" + f.Reason
	if key == v.lastKey && time.Since(v.lastPrint) < 3*time.Second && !f.Done {
		return
	}
	v.lastKey, v.lastPrint = key, time.Now()
	fmt.Fprintf(v.out.w, "  t+%5.1fs  %s  | %s | writes %s\n", f.Since.Seconds(), podsLine(f), orDash(f.Reason), writesLine(f))
}

func (v *liveView) finish() {
	v.out.drawn = 0
}

func (v *liveView) block(f helme2e.Frame) []string {
	status := "rolling"
	if f.Done {
		status = "done"
	}
	lines := []string{
		fmt.Sprintf("  %s  t+%.1fs  StatefulSet updateStrategy %s  [%s]", v.title, f.Since.Seconds(), f.Strategy, status),
		fmt.Sprintf("  %-8s %-12s %-8s %-14s %-7s %s", "POD", "REVISION", "UPDATED", "PARTICIPATING", "ROLE", "STATE"),
	}
	for _, p := range f.Pods {
		lines = append(lines, fmt.Sprintf("  %-8s %-12s %-8s %-14s %-7s %s", p.Name, p.Revision, yesNo(p.Updated), yesNo(p.Participating), orDash(p.Role), p.State))
	}
	lines = append(lines,
		"  controller: "+orDash(f.Reason),
		"  writes:     "+writesLine(f),
	)
	return lines
}

func podsLine(f helme2e.Frame) string {
	parts := make([]string, 0, len(f.Pods))
	for _, p := range f.Pods {
		flags := ""
		if p.Updated {
			flags += "new"
		} else {
			flags += "old"
		}
		if p.Participating {
			flags += ",in"
		} else {
			flags += ",out"
		}
		if p.Role != "" {
			flags += "," + p.Role
		}
		parts = append(parts, fmt.Sprintf("%s[%s %s %s]", p.Name, p.Revision, flags, p.State))
	}
	return strings.Join(parts, " ")
}

func writesLine(f helme2e.Frame) string {
	gap := "none"
	if f.CurrentGap > 0 {
		gap = f.CurrentGap.Round(10 * time.Millisecond).String()
	}
	return fmt.Sprintf("%5.1f acks/s  acked %d  failed %d  current gap %s", f.AcksPerSecond, f.Acked, f.Failed, gap)
}

func printSummary(out *screen, results []result) {
	out.linef("")
	out.linef("=== summary: 3 members, %s-%d dead, etcd %s -> %s ===", "etcd", deadMember, fromVersion, toVersion)
	header := fmt.Sprintf("  %-28s", "")
	for _, r := range results {
		header += fmt.Sprintf(" %-24s", r.title)
	}
	out.linef("%s", header)
	rows := []struct {
		name string
		cell func(r *helme2e.RolloutResult) string
	}{
		{"rollout duration", func(r *helme2e.RolloutResult) string {
			if !r.Completed {
				return fmt.Sprintf("not done after %s", r.Duration.Round(time.Second))
			}
			return r.Duration.Round(100 * time.Millisecond).String()
		}},
		{"quorum loss (ms, total)", func(r *helme2e.RolloutResult) string { return fmt.Sprint(r.Report.QuorumLossMs) }},
		{"longest quorum loss (ms)", func(r *helme2e.RolloutResult) string { return fmt.Sprint(r.Report.LongestQuorumLossMs) }},
		{"longest write gap (ms)", func(r *helme2e.RolloutResult) string { return fmt.Sprint(r.Report.LongestWriteGapMs) }},
		{"failed writes", func(r *helme2e.RolloutResult) string { return fmt.Sprint(r.Report.FailedWrites) }},
		{"acknowledged writes", func(r *helme2e.RolloutResult) string { return fmt.Sprint(r.Report.AckedWrites) }},
		{"acknowledged writes lost", func(r *helme2e.RolloutResult) string {
			if r.Report.AuditError != "" {
				return "audit failed"
			}
			return fmt.Sprint(r.Report.LostAckedWrites)
		}},
		{"leader changes", func(r *helme2e.RolloutResult) string { return fmt.Sprint(r.Report.LeaderChanges) }},
		{"deletion order", func(r *helme2e.RolloutResult) string {
			names := make([]string, 0, len(r.Deletions))
			for _, d := range r.Deletions {
				names = append(names, strings.TrimPrefix(d.Pod, "etcd-"))
			}
			if len(names) == 0 {
				return "-"
			}
			return "etcd-" + strings.Join(names, ",")
		}},
		{"deletions the auditor flags", func(r *helme2e.RolloutResult) string {
			n := 0
			for _, d := range r.Deletions {
				if d.Violation != "" {
					n++
				}
			}
			return fmt.Sprint(n)
		}},
	}
	for _, row := range rows {
		line := fmt.Sprintf("  %-28s", row.name)
		for _, r := range results {
			line += fmt.Sprintf(" %-24s", row.cell(r.run))
		}
		out.linef("%s", line)
	}
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
