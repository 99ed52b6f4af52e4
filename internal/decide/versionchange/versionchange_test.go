package versionchange

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

const (
	img36 = "quay.io/coreos/etcd:v3.6.8"
	img37 = "quay.io/coreos/etcd:v3.7.3"
	img35 = "quay.io/coreos/etcd:v3.5.21"
	img38 = "quay.io/coreos/etcd:v3.8.0"
	// img36bad is a 3.6 image that cannot start (a tag no registry holds).
	img36bad = "quay.io/coreos/etcd:v3.6.99"
)

func failure(pod, image string) Failure {
	return Failure{Pod: pod, Image: image, Reason: "ImagePullBackOff"}
}

func member(name, server, storage string) Member {
	m := Member{Name: name, Answered: true}
	m.Server, _ = ParseVersion(server)
	if storage != "" {
		m.Storage, m.StorageKnown = ParseVersion(storage)
	}
	return m
}

func enabled(m Member, target string) Member {
	m.DowngradeEnabled = true
	m.DowngradeTarget, _ = ParseVersion(target)
	return m
}

func three(server, storage string) []Member {
	return []Member{member("etcd-0", server, storage), member("etcd-1", server, storage), member("etcd-2", server, storage)}
}

func allEnabled(ms []Member, target string) []Member {
	out := make([]Member, len(ms))
	for i, m := range ms {
		out[i] = enabled(m, target)
	}
	return out
}

func TestPlan(t *testing.T) {
	mixed := three("3.7.3", "3.7.0")
	mixed[1] = member("etcd-1", "3.6.8", "3.6.0")
	silent := three("3.7.3", "3.7.0")
	silent[2] = Member{Name: "etcd-2"}
	storageBehind := allEnabled(three("3.7.3", "3.6.0"), "3.6.0")
	storageBehind[0].Storage, _ = ParseVersion("3.7.0")
	halfway := allEnabled(three("3.7.3", "3.6.0"), "3.6.0")
	halfway[2].Server, _ = ParseVersion("3.6.8")

	// oneFailed: the first follower replaced onto the target does not start; the others run the
	// source with the downgrade enabled.
	oneFailed := allEnabled(three("3.7.3", "3.6.0"), "3.6.0")
	oneFailed[0] = Member{Name: "etcd-0"}
	for _, tc := range []struct {
		name    string
		o       Observed
		rule    string
		render  string
		action  Action
		target  string
		refused bool
		// source and failedTarget are the record the decision leaves on the StatefulSet.
		source, failedTarget string
		// inReason are words the reason must carry: the numbers behind the decision.
		inReason []string
	}{
		{name: "no StatefulSet yet", o: Observed{Desired: img36}, rule: "version/new", render: img36},
		{name: "digest only: not judged", o: Observed{Desired: "quay.io/coreos/etcd@sha256:abcd", Running: img37, StatefulSetReplicas: 3},
			rule: "version/not-judged", render: "quay.io/coreos/etcd@sha256:abcd"},
		{name: "wrapper tag: not judged", o: Observed{Desired: "example.com/etcd-wrapper:v0.4.2", Running: img37, StatefulSetReplicas: 3},
			rule: "version/not-judged", render: "example.com/etcd-wrapper:v0.4.2"},
		{name: "patch change within a minor", o: Observed{Desired: "quay.io/coreos/etcd:v3.6.5", Running: img36, StatefulSetReplicas: 3},
			rule: "version/steady", render: "quay.io/coreos/etcd:v3.6.5"},
		{name: "upgrade by one minor", o: Observed{Desired: img37, Running: img36, StatefulSetReplicas: 3, Members: three("3.6.8", "3.6.0")},
			rule: "version/upgrade", render: img37},
		{name: "upgrade skipping a minor refused", o: Observed{Desired: img38, Running: img36, StatefulSetReplicas: 3},
			rule: "version/refuse-upgrade-skipping-minor", render: img36, refused: true, inReason: []string{"3.7 first"}},
		{name: "downgrade by two minors refused", o: Observed{Desired: img35, Running: img37, StatefulSetReplicas: 3, Members: three("3.7.3", "3.7.0")},
			rule: "downgrade/refuse-more-than-one-minor", render: img37, refused: true, inReason: []string{"3.7 → 3.5", "3.6 first"}},
		{name: "downgrade waits for every member", o: Observed{Desired: img36, Running: img37, StatefulSetReplicas: 3, Members: silent},
			rule: "downgrade/wait-members", render: img37, inReason: []string{"2 of 3", "etcd-2"}},
		{name: "downgrade waits for members not yet asked", o: Observed{Desired: img36, Running: img37, StatefulSetReplicas: 3, Members: three("3.7.3", "3.7.0")[:2]},
			rule: "downgrade/wait-members", render: img37, inReason: []string{"2 of 3"}},
		{name: "downgrade refused while an upgrade is under way", o: Observed{Desired: img36, Running: img37, StatefulSetReplicas: 3, Members: mixed},
			rule: "downgrade/refuse-cluster-not-at-source", render: img37, refused: true, inReason: []string{"etcd-1 runs 3.6.8"}},
		{name: "downgrade enabled first", o: Observed{Desired: img36, Running: img37, StatefulSetReplicas: 3, Members: three("3.7.3", "3.7.0")},
			rule: "downgrade/enable", render: img37, action: ActionEnable, target: "3.6"},
		{name: "another target cancelled first", o: Observed{Desired: img36, Running: img37, StatefulSetReplicas: 3, Members: allEnabled(three("3.7.3", "3.7.0"), "3.5.0")},
			rule: "downgrade/cancel-other-target", render: img37, action: ActionCancel},
		{name: "storage version awaited", o: Observed{Desired: img36, Running: img37, StatefulSetReplicas: 3, Members: storageBehind},
			rule: "downgrade/wait-storage-version", render: img37, inReason: []string{"etcd-0"}},
		{name: "members replaced once storage is at the target: the source recorded", o: Observed{Desired: img36, Running: img37, StatefulSetReplicas: 3, Members: allEnabled(three("3.7.3", "3.6.0"), "3.6.0")},
			rule: "downgrade/replace-members", render: img36, source: img37},
		{name: "in progress once the template is at the target", o: Observed{Desired: img36, Running: img36, StatefulSetReplicas: 3, Members: halfway, Source: img37},
			rule: "downgrade/in-progress", render: img36, source: img37},
		{name: "in progress: a failure on another image is not the target's", o: Observed{Desired: img36, Running: img36, StatefulSetReplicas: 3, Members: halfway, Source: img37,
			Failed: []Failure{failure("etcd-0", img37)}},
			rule: "downgrade/in-progress", render: img36, source: img37},
		{name: "member failed on the target: cancelled, source rendered, target recorded as failed", o: Observed{Desired: img36bad, Running: img36bad, StatefulSetReplicas: 3,
			Members: oneFailed, Source: img37, Failed: []Failure{failure("etcd-0", img36bad)}},
			rule: "downgrade/roll-forward-member-failed", render: img37, action: ActionCancel, failedTarget: img36bad,
			inReason: []string{"etcd-0 (ImagePullBackOff)", "3.6", img37}},
		{name: "member failed after another moved: rolled forward all the same", o: Observed{Desired: img36bad, Running: img36bad, StatefulSetReplicas: 3,
			Members: []Member{{Name: "etcd-0"}, enabled(member("etcd-1", "3.6.8", "3.6.0"), "3.6.0"), enabled(member("etcd-2", "3.7.3", "3.6.0"), "3.6.0")},
			Source:  img37, Failed: []Failure{failure("etcd-0", img36bad)}},
			rule: "downgrade/roll-forward-member-failed", render: img37, action: ActionCancel, failedTarget: img36bad},
		{name: "member failed, no member answers (no quorum): source rendered, nothing called", o: Observed{Desired: img36bad, Running: img36bad, StatefulSetReplicas: 1,
			Members: []Member{{Name: "etcd-0"}}, Source: img37, Failed: []Failure{failure("etcd-0", img36bad)}},
			rule: "downgrade/roll-forward-member-failed", render: img37, failedTarget: img36bad},
		{name: "member failed, source not recorded: nothing more replaced, refused", o: Observed{Desired: img36bad, Running: img36bad, StatefulSetReplicas: 3,
			Members: oneFailed, Failed: []Failure{failure("etcd-0", img36bad)}},
			rule: "downgrade/member-failed-source-unknown", render: img36bad, refused: true, inReason: []string{"spec.etcd.image back"}},
		{name: "rolled back, downgrade still enabled: cancelled again", o: Observed{Desired: img36bad, Running: img37, StatefulSetReplicas: 3,
			Members: oneFailed, FailedTarget: img36bad, Failed: []Failure{failure("etcd-0", img36bad)}},
			rule: "downgrade/roll-forward-member-failed", render: img37, action: ActionCancel, failedTarget: img36bad},
		{name: "rolled back: the failed target refused while the spec names it", o: Observed{Desired: img36bad, Running: img37, StatefulSetReplicas: 3,
			Members: three("3.7.3", "3.7.0"), FailedTarget: img36bad},
			rule: "downgrade/refuse-failed-target", render: img37, refused: true, failedTarget: img36bad, inReason: []string{img36bad, "spec.etcd.image changes"}},
		{name: "rolled back, spec back at the source: steady, record cleared", o: Observed{Desired: img37, Running: img37, StatefulSetReplicas: 3,
			Members: three("3.7.3", "3.7.0"), FailedTarget: img36bad},
			rule: "version/steady", render: img37},
		{name: "rolled back, spec at another target: a new downgrade, record cleared", o: Observed{Desired: img36, Running: img37, StatefulSetReplicas: 3,
			Members: three("3.7.3", "3.7.0"), FailedTarget: img36bad},
			rule: "downgrade/enable", render: img37, action: ActionEnable, target: "3.6"},
		{name: "upgrade called off before the cluster version rose", o: Observed{Desired: img36, Running: img37, StatefulSetReplicas: 3, Members: []Member{
			member("etcd-0", "3.6.8", "3.6.0"), member("etcd-1", "3.6.8", "3.6.0"), member("etcd-2", "3.7.3", "3.6.0")}},
			rule: "version/revert-upgrade", render: img36},
		{name: "done: etcd ended the downgrade", o: Observed{Desired: img36, Running: img36, StatefulSetReplicas: 3, Members: three("3.6.8", "3.6.0")},
			rule: "version/steady", render: img36},
		{name: "spec back up before the template moved: cancelled", o: Observed{Desired: img37, Running: img37, StatefulSetReplicas: 3, Members: allEnabled(three("3.7.3", "3.6.0"), "3.6.0")},
			rule: "downgrade/cancel-roll-forward", render: img37, action: ActionCancel},
		{name: "spec back up after some members moved: cancelled, rolled forward", o: Observed{Desired: img37, Running: img36, StatefulSetReplicas: 3, Members: halfway},
			rule: "downgrade/cancel-roll-forward", render: img37, action: ActionCancel},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Plan(tc.o)
			if string(d.Rule) != tc.rule || d.Render != tc.render || d.Action != tc.action || d.Refused != tc.refused {
				t.Fatalf("Plan = rule %s render %s action %q refused %v (%s); want rule %s render %s action %q refused %v",
					d.Rule, d.Render, d.Action, d.Refused, d.Reason, tc.rule, tc.render, tc.action, tc.refused)
			}
			if d.Source != tc.source || d.FailedTarget != tc.failedTarget {
				t.Errorf("record source %q failed target %q, want %q %q", d.Source, d.FailedTarget, tc.source, tc.failedTarget)
			}
			if tc.target != "" && d.Target.MinorString() != tc.target {
				t.Errorf("target %s, want %s", d.Target.MinorString(), tc.target)
			}
			for _, w := range tc.inReason {
				if !strings.Contains(d.Reason, w) {
					t.Errorf("reason %q lacks %q", d.Reason, w)
				}
			}
		})
	}
}

func TestParseImage(t *testing.T) {
	for _, tc := range []struct {
		image string
		want  string
		ok    bool
	}{
		{"quay.io/coreos/etcd:v3.6.8", "3.6.8", true},
		{"registry.k8s.io/etcd:3.6.8-0", "3.6.8", true},
		{"localhost:5000/etcd:v3.7.3@sha256:abcd", "3.7.3", true},
		{"etcd:3.7.0-rc.1", "3.7.0", true},
		{"localhost:5000/etcd", "", false},
		{"quay.io/coreos/etcd@sha256:abcd", "", false},
		{"etcd:latest", "", false},
		{"etcd-wrapper:v0.4.2", "", false},
	} {
		t.Run(tc.image, func(t *testing.T) {
			v, ok := ParseImage(tc.image)
			if ok != tc.ok || (ok && v.String() != tc.want) {
				t.Fatalf("ParseImage(%q) = %s, %v; want %s, %v", tc.image, v, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestNeedsMembers(t *testing.T) {
	for _, tc := range []struct {
		desired, running string
		recorded, want   bool
	}{
		{img36, img36, false, false},
		{img37, img36, false, true},
		{img36, img37, false, true},
		{img36, img36, true, true},
		{"etcd@sha256:abcd", img36, false, false},
	} {
		t.Run(fmt.Sprintf("%s<-%s,%v", tc.desired, tc.running, tc.recorded), func(t *testing.T) {
			if got := NeedsMembers(tc.desired, tc.running, tc.recorded); got != tc.want {
				t.Fatalf("NeedsMembers = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestPlanProperties checks, over random observations, what must hold whatever the rule:
//   - an older minor image is rendered only when every member answered and every member's
//     storage is at that minor (etcd's downgrade rewrote it, or the cluster version never rose),
//     or the template runs it already;
//   - a downgrade is enabled only on the word of every member, all at the running version;
//   - a refusal renders what runs and calls nothing;
//   - every decision names a rule and a reason;
//   - a member failed on the rendered downgrade target always rolls forward to the recorded
//     source (cancelling the downgrade whenever a member reports it enabled) and records the
//     target as failed, or, with no source recorded, is refused: never does the target stay
//     rendered under a rule that goes on replacing members onto it;
//   - a target recorded as failed is never rendered nor enabled again while the spec names it,
//     and only the spec's image is ever recorded as failed.
func TestPlanProperties(t *testing.T) {
	images := []string{img35, img36, img37, img38, img36bad, "quay.io/coreos/etcd@sha256:abcd"}
	versions := []string{"3.5.21", "3.6.8", "3.7.3"}
	storages := []string{"", "3.5.0", "3.6.0", "3.7.0"}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 20000; i++ {
		o := Observed{Desired: images[rng.IntN(len(images))], Running: images[rng.IntN(len(images))], StatefulSetReplicas: 1 + rng.IntN(5)}
		if rng.IntN(10) == 0 {
			o.Running = ""
		}
		n := rng.IntN(o.StatefulSetReplicas + 2)
		for j := 0; j < n; j++ {
			m := Member{Name: fmt.Sprintf("etcd-%d", j)}
			if rng.IntN(8) != 0 {
				m = member(m.Name, versions[rng.IntN(len(versions))], storages[rng.IntN(len(storages))])
				if rng.IntN(3) == 0 {
					m = enabled(m, storages[1+rng.IntN(len(storages)-1)])
				}
			}
			o.Members = append(o.Members, m)
		}
		if rng.IntN(2) == 0 {
			o.Source = images[rng.IntN(len(images))]
		}
		if rng.IntN(3) == 0 {
			o.FailedTarget = images[rng.IntN(len(images))]
		}
		for j := rng.IntN(3); j > 0; j-- {
			o.Failed = append(o.Failed, failure(fmt.Sprintf("etcd-%d", rng.IntN(o.StatefulSetReplicas)), images[rng.IntN(len(images))]))
		}
		if rng.IntN(4) == 0 {
			// The interesting case, more often than chance: the target rendered, a member on it
			// failed.
			o.Running = o.Desired
			o.Failed = append(o.Failed, failure("etcd-0", o.Desired))
		}
		d := Plan(o)
		where := fmt.Sprintf("observation %+v: decision %+v", o, d)
		if d.Rule == "" || d.Reason == "" {
			t.Fatalf("no rule or reason: %s", where)
		}
		if d.Refused && (d.Render != o.Running || d.Action != ActionNone) {
			t.Fatalf("a refusal must render what runs and call nothing: %s", where)
		}
		rv, okR := ParseImage(o.Running)
		dv, okD := ParseImage(d.Render)
		if okR && okD && dv.minor() < rv.minor() {
			if !allAnswered(o) || !allStorageAt(o.Members, dv) {
				t.Fatalf("older minor rendered without every member's storage at it: %s", where)
			}
		}
		if d.FailedTarget != "" && d.FailedTarget != o.Desired {
			t.Fatalf("recorded as failed an image the spec does not name: %s", where)
		}
		if d.RolledBack && !d.Refused {
			t.Fatalf("a rolled-back target not refused: %s", where)
		}
		enabledAny, enabledTo, _ := downgradeState(o.Members)
		dsv, okDs := ParseImage(o.Desired)
		// The target rendered: the template runs the spec's image, and it is a downgrade's target
		// by the source recorded or by the downgrade etcd has enabled.
		targetRendered := o.Running != "" && o.Running == o.Desired && okDs &&
			(o.Source != "" || enabledAny && enabledTo.minor() == dsv.minor())
		if targetRendered && len(failedOn(o.Failed, o.Desired)) > 0 {
			switch {
			case d.Refused:
				if d.Rule != RuleMemberFailedNoSource {
					t.Fatalf("a failed member refused under another rule: %s", where)
				}
			case d.Rule != RuleRollForwardMemberFailed || d.Render != o.Source || d.FailedTarget != o.Desired:
				t.Fatalf("a member failed on the target without a roll forward to the source: %s", where)
			case (d.Action == ActionCancel) != enabledAny:
				t.Fatalf("the downgrade's cancel not asked exactly when a member reports it enabled: %s", where)
			}
		}
		if o.FailedTarget != "" && o.FailedTarget == o.Desired && o.Running != o.Desired && okDs && okR && dsv.minor() < rv.minor() {
			if d.Render != o.Running || d.Action == ActionEnable {
				t.Fatalf("a failed target rendered or enabled again: %s", where)
			}
		}
		if d.Action == ActionEnable {
			if !allAnswered(o) {
				t.Fatalf("downgrade enabled without every member's word: %s", where)
			}
			for _, m := range o.Members {
				if m.Server.minor() != rv.minor() {
					t.Fatalf("downgrade enabled on a mixed cluster: %s", where)
				}
			}
			if d.Target.minor() != rv.minor()-1 {
				t.Fatalf("downgrade enabled by other than one minor: %s", where)
			}
		}
	}
}

func allAnswered(o Observed) bool {
	n := 0
	for _, m := range o.Members {
		if !m.Answered {
			return false
		}
		n++
	}
	return n >= o.StatefulSetReplicas
}

func allStorageAt(ms []Member, v Version) bool {
	for _, m := range ms {
		if !m.StorageKnown || m.Storage.minor() != v.minor() {
			return false
		}
	}
	return true
}
