package copytask

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/contract/snapshot"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/ruleid"
)

// Action is what the controller does.
type Action string

const (
	// ActionNone: the task finished; nothing is done and nothing is written.
	ActionNone Action = "none"
	// ActionWait: nothing now; look again after RequeueAfter.
	ActionWait Action = "wait"
	// ActionCopy: run the copy, then plan again with its outcome (Observed.Copy).
	ActionCopy Action = "copy"
	// ActionSucceed and ActionFail finish the task (NextStatus).
	ActionSucceed Action = "succeed"
	ActionFail    Action = "fail"
	// ActionRetry: record the error in lastError and try again after RequeueAfter.
	ActionRetry Action = "retry"
)

// Rule ids, in the order Plan asks the rules.
const (
	RuleSucceeded         ruleid.ID = "copytask/finished/succeeded"
	RuleFailed            ruleid.ID = "copytask/finished/failed"
	RuleFailSourceStore   ruleid.ID = "copytask/fail/invalid-source-store"
	RuleFailTargetStore   ruleid.ID = "copytask/fail/invalid-target-store"
	RuleFailSameStore     ruleid.ID = "copytask/fail/same-store"
	RuleCopied            ruleid.ID = "copytask/copied"
	RuleFailCopy          ruleid.ID = "copytask/fail/copy"
	RuleRetryCopy         ruleid.ID = "copytask/retry/copy"
	RuleRetryStore        ruleid.ID = "copytask/retry/store-unreachable"
	RuleWaitFinal         ruleid.ID = "copytask/wait/final-snapshot"
	RuleCopyAfterFinal    ruleid.ID = "copytask/copy/final-snapshot"
	RuleCopyFinalTimedOut ruleid.ID = "copytask/copy/final-snapshot-timed-out"
	RuleCopy              ruleid.ID = "copytask/copy"
)

// Poll is how often a task waiting for the final snapshot looks at the source again.
const Poll = 5 * time.Second

// RetryAfter is the pause before a copy that failed on a transient error is tried again.
const RetryAfter = 10 * time.Second

// Observed is what the controller read.
type Observed struct {
	// Generation and Created are the task's metadata.generation and creationTimestamp.
	Generation int64
	Created    time.Time
	// Conditions are the task's status conditions (a finished task has Succeeded or Failed).
	Conditions []druidv1alpha1.Condition
	// SourceProblem and TargetProblem say why a store cannot be opened from its StoreSpec and
	// Secret (a provider not supported, no container, the Secret missing or without a key): the
	// spec is wrong, trying again does not help. "" when it can.
	SourceProblem, TargetProblem string
	// SameStore: source and target are the same objects (provider, container, prefix, endpoint).
	SameStore bool
	// WaitForFinal and WaitTimeout are spec.waitForFinalSnapshot (0: no bound).
	WaitForFinal bool
	WaitTimeout  time.Duration
	// SourceFull is the source's newest full snapshot, read only while waiting for the final
	// one; nil when there is none (or it was not read).
	SourceFull *snapshot.Snapshot
	// ReadError is a transient error reading the source before the copy ("" when none).
	ReadError string
	// Copy is the outcome of the copy the controller just ran; nil before it ran.
	Copy *CopyOutcome
	Now  time.Time
}

// CopyOutcome is what a copy run did.
type CopyOutcome struct {
	// Summary says what was copied and skipped (backupcopy.Result).
	Summary string
	// Err is the run's error, "" when it finished; Permanent says a new run would fail the same
	// way (backupcopy.Permanent).
	Err       string
	Permanent bool
}

// Decision is the next step and why.
type Decision struct {
	Action Action
	Rule   ruleid.ID
	// Message explains the decision with its numbers; it becomes the condition message, the
	// lastError or the Event.
	Message      string
	RequeueAfter time.Duration
}

// rule answers or passes (ok false).
type rule func(o Observed) (Decision, bool)

// rules is the order the rules are asked in: the first that answers decides.
var rules = []rule{
	ruleFinished,
	ruleInvalidStores,
	ruleCopyOutcome,
	ruleStoreUnreachable,
	ruleWaitForFinal,
	ruleCopy,
}

// Plan picks the task's next step.
func Plan(o Observed) Decision {
	for _, r := range rules {
		if d, ok := r(o); ok {
			return d
		}
	}
	// ruleCopy always answers.
	panic("copytask: no rule answered")
}

// Finished says whether conditions mark a finished task (Succeeded or Failed True): the
// controller then opens no store for it.
func Finished(conditions []druidv1alpha1.Condition) bool {
	_, ok := ruleFinished(Observed{Conditions: conditions})
	return ok
}

// ruleFinished: a task that finished stays as it is.
func ruleFinished(o Observed) (Decision, bool) {
	if c := druidv1alpha1.FindCondition(o.Conditions, druidv1alpha1.EtcdCopyBackupsTaskSucceeded); c != nil && c.Status == druidv1alpha1.ConditionTrue {
		return Decision{Action: ActionNone, Rule: RuleSucceeded, Message: "finished: " + c.Message}, true
	}
	if c := druidv1alpha1.FindCondition(o.Conditions, druidv1alpha1.EtcdCopyBackupsTaskFailed); c != nil && c.Status == druidv1alpha1.ConditionTrue {
		return Decision{Action: ActionNone, Rule: RuleFailed, Message: "finished: " + c.Message}, true
	}
	return Decision{}, false
}

// ruleInvalidStores: a store the spec names wrongly fails the task before anything is read or
// written.
func ruleInvalidStores(o Observed) (Decision, bool) {
	switch {
	case o.SourceProblem != "":
		return Decision{Action: ActionFail, Rule: RuleFailSourceStore, Message: "spec.sourceStore: " + o.SourceProblem + "; nothing was copied"}, true
	case o.TargetProblem != "":
		return Decision{Action: ActionFail, Rule: RuleFailTargetStore, Message: "spec.targetStore: " + o.TargetProblem + "; nothing was copied"}, true
	case o.SameStore:
		return Decision{Action: ActionFail, Rule: RuleFailSameStore,
			Message: "spec.sourceStore and spec.targetStore name the same store; nothing was copied"}, true
	}
	return Decision{}, false
}

// ruleCopyOutcome: after a copy ran, its outcome decides.
func ruleCopyOutcome(o Observed) (Decision, bool) {
	c := o.Copy
	switch {
	case c == nil:
		return Decision{}, false
	case c.Err == "":
		return Decision{Action: ActionSucceed, Rule: RuleCopied, Message: "copied " + c.Summary}, true
	case c.Permanent:
		return Decision{Action: ActionFail, Rule: RuleFailCopy,
			Message: fmt.Sprintf("%s; so far %s; the target keeps what was copied", c.Err, c.Summary)}, true
	}
	return Decision{Action: ActionRetry, Rule: RuleRetryCopy, RequeueAfter: RetryAfter,
		Message: fmt.Sprintf("%s; so far %s; trying again in %s, skipping what is copied", c.Err, c.Summary, RetryAfter)}, true
}

// ruleStoreUnreachable: the source could not be read while deciding whether to wait.
func ruleStoreUnreachable(o Observed) (Decision, bool) {
	if o.ReadError == "" {
		return Decision{}, false
	}
	return Decision{Action: ActionRetry, Rule: RuleRetryStore, RequeueAfter: RetryAfter,
		Message: fmt.Sprintf("reading the source store: %s; trying again in %s", o.ReadError, RetryAfter)}, true
}

// ruleWaitForFinal: with waitForFinalSnapshot, the copy waits for the final full snapshot
// (FinalSnapshot) until the timeout, then copies anyway.
func ruleWaitForFinal(o Observed) (Decision, bool) {
	if !o.WaitForFinal {
		return Decision{}, false
	}
	if FinalSnapshot(o.SourceFull, o.Created) {
		return Decision{Action: ActionCopy, Rule: RuleCopyAfterFinal,
			Message: fmt.Sprintf("the source holds the final full snapshot %s; copying", o.SourceFull.Name())}, true
	}
	newest := "none"
	if o.SourceFull != nil {
		newest = o.SourceFull.Name()
	}
	if o.WaitTimeout <= 0 {
		return Decision{Action: ActionWait, Rule: RuleWaitFinal, RequeueAfter: Poll,
			Message: fmt.Sprintf("waiting for a full snapshot taken since %s in the source (newest: %s); no timeout",
				o.Created.UTC().Format(time.RFC3339), newest)}, true
	}
	deadline := o.Created.Add(o.WaitTimeout)
	if left := deadline.Sub(o.Now); left > 0 {
		return Decision{Action: ActionWait, Rule: RuleWaitFinal, RequeueAfter: min(Poll, left),
			Message: fmt.Sprintf("waiting for a full snapshot taken since %s in the source (newest: %s); copying anyway at %s",
				o.Created.UTC().Format(time.RFC3339), newest, deadline.UTC().Format(time.RFC3339))}, true
	}
	return Decision{Action: ActionCopy, Rule: RuleCopyFinalTimedOut,
		Message: fmt.Sprintf("no final full snapshot in the source within %s (newest: %s); copying what there is, as etcd-druid does",
			o.WaitTimeout, newest)}, true
}

// ruleCopy: nothing to wait for.
func ruleCopy(Observed) (Decision, bool) {
	return Decision{Action: ActionCopy, Rule: RuleCopy, Message: "copying the backups"}, true
}

// FinalSnapshot says whether full, the source's newest full snapshot, ends the wait: one
// etcd-backup-restore marked final, or one taken at or after the task's creation. Snapshot names
// carry whole seconds, so one taken in the second the task was created counts.
func FinalSnapshot(full *snapshot.Snapshot, created time.Time) bool {
	return full != nil && (full.Final || !full.CreatedOn.Before(created.Truncate(time.Second)))
}

// NextStatus is the status a decision leaves: observedGeneration always; Succeeded or Failed
// (True) when the task finishes; lastError set by a failure or a retry, cleared otherwise.
// Nothing else changes, so a decision that changes nothing leaves an equal status (nothing to
// write).
func NextStatus(old druidv1alpha1.EtcdCopyBackupsTaskStatus, generation int64, d Decision, now time.Time) druidv1alpha1.EtcdCopyBackupsTaskStatus {
	s := *old.DeepCopy()
	if d.Action == ActionNone {
		return s
	}
	s.ObservedGeneration = ptr.To(generation)
	s.LastError = nil
	switch d.Action {
	case ActionSucceed:
		s.Conditions = setTrue(s.Conditions, druidv1alpha1.EtcdCopyBackupsTaskSucceeded, d, now)
	case ActionFail:
		s.Conditions = setTrue(s.Conditions, druidv1alpha1.EtcdCopyBackupsTaskFailed, d, now)
		s.LastError = ptr.To(d.Message)
	case ActionRetry:
		s.LastError = ptr.To(d.Message)
	}
	return s
}

func setTrue(conds []druidv1alpha1.Condition, t druidv1alpha1.ConditionType, d Decision, now time.Time) []druidv1alpha1.Condition {
	at := metav1.NewTime(now)
	c := druidv1alpha1.Condition{Type: t, Status: druidv1alpha1.ConditionTrue, LastTransitionTime: at, LastUpdateTime: at,
		Reason: d.Rule.CamelCase(), Message: d.Message}
	if old := druidv1alpha1.FindCondition(conds, t); old != nil {
		*old = c
		return conds
	}
	return append(conds, c)
}
