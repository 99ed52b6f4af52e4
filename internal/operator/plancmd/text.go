package plancmd

import (
	"fmt"
	"io"
	"strings"
)

// WriteText writes out for a person at a terminal: one block per deciding controller, its action
// and rule on the first line, the reason (with its numbers) below, then what it acts on or why
// plan cannot tell. The JSON output carries the same and more, for scripts.
func WriteText(w io.Writer, out Output) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Etcd %s, StatefulSet %s (update revision %s)\n", orUnknown(out.Etcd), out.StatefulSet, orUnknown(out.UpdateRevision))
	if out.EtcdDefaults != "" {
		fmt.Fprintf(&b, "  no Etcd in the state: %s\n", out.EtcdDefaults)
	}
	if out.MemberQueryError != "" {
		fmt.Fprintf(&b, "  members not asked: %s\n", out.MemberQueryError)
	}
	c := out.Controllers
	for _, s := range []struct {
		name string
		step Step
	}{
		{"rollout", c.Rollout}, {"membership", c.Membership}, {"member restart", c.MemberRestart},
		{"recovery", c.Recovery}, {"defragmentation", c.Defragmentation},
		{"tls transport", c.Transport}, {"etcd version", c.Version}, {"volumes", c.Volumes}, {"tls material", c.Trust},
	} {
		writeStep(&b, s.name, s.step)
	}
	if out.RoleDetail != "" {
		fmt.Fprintf(&b, "\nroles (%s): %s\n", out.RoleSource, out.RoleDetail)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func writeStep(b *strings.Builder, name string, s Step) {
	fmt.Fprintf(b, "\n%s: ", name)
	if s.NotDecided != "" {
		fmt.Fprintf(b, "not decided\n  %s\n", s.NotDecided)
		return
	}
	fmt.Fprintf(b, "%s", orUnknown(s.Action))
	if s.Rule != "" {
		fmt.Fprintf(b, " [%s]", s.Rule)
	}
	b.WriteString("\n")
	if s.Reason != "" {
		fmt.Fprintf(b, "  %s\n", s.Reason)
	}
	var on []string
	if len(s.Pods) > 0 {
		on = append(on, "pods "+strings.Join(s.Pods, ", "))
	}
	for _, f := range []struct{ label, value string }{
		{"handover to", s.HandoverTo}, {"member", s.Member}, {"member ID", s.MemberID}, {"target", s.Target}, {"cluster", s.ClusterID}, {"image", s.Image},
	} {
		if f.value != "" {
			on = append(on, f.label+" "+f.value)
		}
	}
	if s.Ordinal != nil {
		on = append(on, fmt.Sprintf("ordinal %d", *s.Ordinal))
	}
	if s.Replicas != nil {
		on = append(on, fmt.Sprintf("replicas %d", *s.Replicas))
	}
	if len(on) > 0 {
		fmt.Fprintf(b, "  acts on: %s\n", strings.Join(on, "; "))
	}
	if s.Schedule != "" {
		next := "unknown"
		if s.NextRun != nil {
			next = s.NextRun.UTC().Format("2006-01-02 15:04 MST")
		}
		fmt.Fprintf(b, "  schedule %s, next run %s", s.Schedule, next)
		if s.IfDueNow {
			b.WriteString(" (the step is what a run starting now would do)")
		}
		b.WriteString("\n")
	}
	for _, n := range s.Notes {
		fmt.Fprintf(b, "  note: %s\n", n)
	}
}

func orUnknown(s string) string {
	if s == "" {
		return "(unknown)"
	}
	return s
}
