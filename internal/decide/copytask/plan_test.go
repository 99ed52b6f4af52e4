package copytask

import (
	"math/rand"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/contract/snapshot"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/ruleid"
)

var created = time.Date(2026, 11, 26, 12, 0, 0, 500_000_000, time.UTC)

// observed is a task created at `created`, observed a minute later, with usable stores.
type observed Observed

func task() *observed {
	return &observed{Generation: 2, Created: created, Now: created.Add(time.Minute)}
}

func (o *observed) finished(t druidv1alpha1.ConditionType) *observed {
	o.Conditions = append(o.Conditions, druidv1alpha1.Condition{Type: t, Status: druidv1alpha1.ConditionTrue, Message: "done before"})
	return o
}
func (o *observed) waitFor(timeout time.Duration) *observed {
	o.WaitForFinal, o.WaitTimeout = true, timeout
	return o
}
func (o *observed) newestFull(s snapshot.Snapshot) *observed { o.SourceFull = &s; return o }
func (o *observed) at(d time.Duration) *observed             { o.Now = created.Add(d); return o }
func (o *observed) copied(err string, permanent bool) *observed {
	o.Copy = &CopyOutcome{Summary: "3 backups: 5 objects copied (100 bytes), 2 already in the target", Err: err, Permanent: permanent}
	return o
}
func (o *observed) build() Observed { return Observed(*o) }

func TestPlan(t *testing.T) {
	before := snapshot.Full(40, created.Add(-time.Hour))
	sameSecond := snapshot.Full(50, created.Truncate(time.Second))
	final := before
	final.Final = true
	tests := []struct {
		name       string
		o          *observed
		wantAction Action
		wantRule   ruleid.ID
		wantIn     string
		wantAfter  time.Duration
	}{
		{"succeeded stays", task().finished(druidv1alpha1.EtcdCopyBackupsTaskSucceeded).copied("", false), ActionNone, RuleSucceeded, "done before", 0},
		{"failed stays", func() *observed {
			o := task().finished(druidv1alpha1.EtcdCopyBackupsTaskFailed)
			o.SourceProblem = "x"
			return o
		}(),
			ActionNone, RuleFailed, "done before", 0},
		{"invalid source store fails", func() *observed { o := task(); o.SourceProblem = `Secret ns/src does not exist`; return o }(),
			ActionFail, RuleFailSourceStore, "spec.sourceStore: Secret ns/src does not exist; nothing was copied", 0},
		{"invalid target store fails", func() *observed { o := task(); o.TargetProblem = `provider "gcp" is not supported`; return o }(),
			ActionFail, RuleFailTargetStore, "spec.targetStore: provider", 0},
		{"same store fails", func() *observed { o := task(); o.SameStore = true; return o }(),
			ActionFail, RuleFailSameStore, "same store", 0},
		{"copy done succeeds with the numbers", task().copied("", false), ActionSucceed, RuleCopied, "5 objects copied", 0},
		{"copy error permanent fails", task().copied("object v2/Full-x: sha256 is a, want b", true), ActionFail, RuleFailCopy, "sha256 is a", 0},
		{"copy error transient retries", task().copied("connection refused", false), ActionRetry, RuleRetryCopy, "skipping what is copied", RetryAfter},
		{"source unreadable retries", func() *observed { o := task().waitFor(0); o.ReadError = "connection refused"; return o }(),
			ActionRetry, RuleRetryStore, "connection refused", RetryAfter},
		{"no wait copies", task(), ActionCopy, RuleCopy, "copying", 0},
		{"wait: no full snapshot yet", task().waitFor(time.Hour), ActionWait, RuleWaitFinal, "newest: none", Poll},
		{"wait: only an older full snapshot", task().waitFor(time.Hour).newestFull(before), ActionWait, RuleWaitFinal, before.Name(), Poll},
		{"wait: the poll is cut at the deadline", task().waitFor(time.Minute + time.Second).newestFull(before), ActionWait, RuleWaitFinal, "copying anyway", time.Second},
		{"wait without timeout", task().waitFor(0).at(100 * time.Hour), ActionWait, RuleWaitFinal, "no timeout", Poll},
		{"a full snapshot of the task's second ends the wait", task().waitFor(time.Hour).newestFull(sameSecond), ActionCopy, RuleCopyAfterFinal, sameSecond.Name(), 0},
		{"a final full snapshot ends the wait", task().waitFor(time.Hour).newestFull(final), ActionCopy, RuleCopyAfterFinal, final.Name(), 0},
		{"timed out: copies anyway, as etcd-druid", task().waitFor(time.Minute).newestFull(before), ActionCopy, RuleCopyFinalTimedOut, "within 1m0s", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Plan(tt.o.build())
			if d.Action != tt.wantAction || d.Rule != tt.wantRule {
				t.Errorf("Plan() = %s by %s, want %s by %s (%s)", d.Action, d.Rule, tt.wantAction, tt.wantRule, d.Message)
			}
			if !strings.Contains(d.Message, tt.wantIn) {
				t.Errorf("message %q does not say %q", d.Message, tt.wantIn)
			}
			if d.RequeueAfter != tt.wantAfter {
				t.Errorf("requeue after %s, want %s", d.RequeueAfter, tt.wantAfter)
			}
		})
	}
}

// TestPlanProperties: over random observations, a finished task is never acted on, nothing is
// copied from or to a store that cannot be opened, a copy's outcome always finishes or retries
// (never a second copy in the same reconcile), and no wait outlasts its timeout.
func TestPlanProperties(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	pick := func(s ...string) string { return s[rng.Intn(len(s))] }
	for i := 0; i < 5000; i++ {
		o := task().at(time.Duration(rng.Intn(7200)) * time.Second)
		if rng.Intn(5) == 0 {
			o.finished(druidv1alpha1.ConditionType(pick(string(druidv1alpha1.EtcdCopyBackupsTaskSucceeded), string(druidv1alpha1.EtcdCopyBackupsTaskFailed))))
		}
		o.SourceProblem, o.TargetProblem = pick("", "", "", "bad"), pick("", "", "", "bad")
		o.SameStore = rng.Intn(8) == 0
		if rng.Intn(2) == 0 {
			o.waitFor(time.Duration(rng.Intn(3600)) * time.Second)
		}
		if rng.Intn(2) == 0 {
			o.newestFull(snapshot.Full(9, created.Add(time.Duration(rng.Intn(7200)-3600)*time.Second)))
		}
		o.ReadError = pick("", "", "unreachable")
		if rng.Intn(2) == 0 {
			o.copied(pick("", "boom"), rng.Intn(2) == 0)
		}
		obs := o.build()
		d := Plan(obs)
		finished := len(obs.Conditions) > 0
		switch {
		case finished && d.Action != ActionNone:
			t.Fatalf("%+v: a finished task got %s by %s", obs, d.Action, d.Rule)
		case !finished && (obs.SourceProblem != "" || obs.TargetProblem != "" || obs.SameStore) && d.Action != ActionFail:
			t.Fatalf("%+v: stores that cannot be used, yet %s by %s", obs, d.Action, d.Rule)
		case !finished && obs.Copy != nil && d.Action != ActionFail && d.Action != ActionSucceed && d.Action != ActionRetry && d.Rule != RuleFailSourceStore:
			t.Fatalf("%+v: after a copy, %s by %s", obs, d.Action, d.Rule)
		case d.Action == ActionWait && obs.WaitTimeout > 0 && !obs.Now.Before(obs.Created.Add(obs.WaitTimeout)):
			t.Fatalf("%+v: waits past its timeout", obs)
		case d.Action == ActionWait && d.RequeueAfter <= 0:
			t.Fatalf("%+v: a wait without a requeue", obs)
		}
	}
}

func TestNextStatus(t *testing.T) {
	now := created.Add(time.Hour)
	t.Run("success sets Succeeded True and clears lastError", func(t *testing.T) {
		old := druidv1alpha1.EtcdCopyBackupsTaskStatus{LastError: ptr.To("connection refused")}
		s := NextStatus(old, 3, Decision{Action: ActionSucceed, Rule: RuleCopied, Message: "copied it"}, now)
		c := druidv1alpha1.FindCondition(s.Conditions, druidv1alpha1.EtcdCopyBackupsTaskSucceeded)
		if c == nil || c.Status != druidv1alpha1.ConditionTrue || c.Reason != "CopytaskCopied" || c.Message != "copied it" || !c.LastTransitionTime.Time.Equal(now) {
			t.Errorf("Succeeded = %+v", c)
		}
		if s.LastError != nil || ptr.Deref(s.ObservedGeneration, 0) != 3 {
			t.Errorf("lastError %v, observedGeneration %v", s.LastError, s.ObservedGeneration)
		}
	})
	t.Run("failure sets Failed True and lastError", func(t *testing.T) {
		s := NextStatus(druidv1alpha1.EtcdCopyBackupsTaskStatus{}, 1, Decision{Action: ActionFail, Rule: RuleFailSourceStore, Message: "no Secret"}, now)
		c := druidv1alpha1.FindCondition(s.Conditions, druidv1alpha1.EtcdCopyBackupsTaskFailed)
		if c == nil || c.Status != druidv1alpha1.ConditionTrue || c.Reason != "CopytaskFailInvalidSourceStore" || ptr.Deref(s.LastError, "") != "no Secret" {
			t.Errorf("Failed = %+v, lastError %v", c, s.LastError)
		}
		if druidv1alpha1.FindCondition(s.Conditions, druidv1alpha1.EtcdCopyBackupsTaskSucceeded) != nil {
			t.Error("a failed task has a Succeeded condition")
		}
	})
	t.Run("retry keeps no condition, sets lastError", func(t *testing.T) {
		s := NextStatus(druidv1alpha1.EtcdCopyBackupsTaskStatus{}, 1, Decision{Action: ActionRetry, Rule: RuleRetryCopy, Message: "refused"}, now)
		if len(s.Conditions) != 0 || ptr.Deref(s.LastError, "") != "refused" {
			t.Errorf("status %+v", s)
		}
	})
	t.Run("a finished task's status is left as it is", func(t *testing.T) {
		old := druidv1alpha1.EtcdCopyBackupsTaskStatus{ObservedGeneration: ptr.To(int64(1))}
		s := NextStatus(old, 5, Decision{Action: ActionNone, Rule: RuleSucceeded}, now)
		if ptr.Deref(s.ObservedGeneration, 0) != 1 {
			t.Errorf("observedGeneration %v, want 1 kept", s.ObservedGeneration)
		}
	})
}
