package opstask

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/contract/memberlease"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/ruleid"
)

var t0 = time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)

func task(name string, kind druidv1alpha1.OnDemandSnapshotType, state druidv1alpha1.TaskState) druidv1alpha1.EtcdOpsTask {
	tk := druidv1alpha1.EtcdOpsTask{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name), CreationTimestamp: metav1.NewTime(t0)},
		Spec: druidv1alpha1.EtcdOpsTaskSpec{EtcdName: ptr.To("main"),
			Config: druidv1alpha1.EtcdOpsTaskConfig{OnDemandSnapshot: &druidv1alpha1.OnDemandSnapshotConfig{Type: kind}}},
	}
	if state != "" {
		tk.Status.State = ptr.To(state)
		tk.Status.LastTransitionTime = ptr.To(metav1.NewTime(t0))
		if state != druidv1alpha1.TaskStatePending {
			tk.Status.StartedAt = ptr.To(metav1.NewTime(t0))
		}
	}
	return tk
}

func TestDecide(t *testing.T) {
	etcd := &druidv1alpha1.Etcd{ObjectMeta: metav1.ObjectMeta{Name: "main", Namespace: "ns"}}
	full := task("t", druidv1alpha1.OnDemandSnapshotTypeFull, druidv1alpha1.TaskStateInProgress)
	delta := task("t", druidv1alpha1.OnDemandSnapshotTypeDelta, druidv1alpha1.TaskStateInProgress)
	req := RequestValue(&full)
	base := func(tk druidv1alpha1.EtcdOpsTask) Observed {
		return Observed{Task: tk, Etcd: etcd, BackupEnabled: true, Lease: &memberlease.SnapshotLeaseRecord{}, Now: t0.Add(10 * time.Second)}
	}
	with := func(o Observed, f func(*Observed)) Observed {
		o.Task = *o.Task.DeepCopy()
		if o.Lease != nil {
			l := *o.Lease
			o.Lease = &l
		}
		f(&o)
		return o
	}
	tests := []struct {
		name   string
		o      Observed
		action Action
		rule   ruleid.ID
		state  druidv1alpha1.TaskState
	}{
		{"new task accepted", base(task("t", "full", "")), ActionTransition, RuleAccept, druidv1alpha1.TaskStatePending},
		{"admitted", base(task("t", "full", druidv1alpha1.TaskStatePending)), ActionTransition, RuleAdmit, druidv1alpha1.TaskStateInProgress},
		{"no etcdName", with(base(task("t", "full", druidv1alpha1.TaskStatePending)), func(o *Observed) { o.Task.Spec.EtcdName = nil }),
			ActionTransition, RuleRejectNoEtcdName, druidv1alpha1.TaskStateRejected},
		{"no operation", with(base(task("t", "full", druidv1alpha1.TaskStatePending)), func(o *Observed) { o.Task.Spec.Config.OnDemandSnapshot = nil }),
			ActionTransition, RuleRejectConfig, druidv1alpha1.TaskStateRejected},
		{"no Etcd", with(base(task("t", "full", druidv1alpha1.TaskStatePending)), func(o *Observed) { o.Etcd = nil }),
			ActionTransition, RuleRejectNoEtcd, druidv1alpha1.TaskStateRejected},
		{"no backup store", with(base(task("t", "delta", druidv1alpha1.TaskStatePending)), func(o *Observed) { o.BackupEnabled = false }),
			ActionTransition, RuleRejectNoStore, druidv1alpha1.TaskStateRejected},
		{"another task in progress", with(base(task("t", "full", druidv1alpha1.TaskStatePending)), func(o *Observed) {
			o.Others = []druidv1alpha1.EtcdOpsTask{task("other", "delta", druidv1alpha1.TaskStateInProgress)}
		}), ActionTransition, RuleRejectDuplicate, druidv1alpha1.TaskStateRejected},
		{"an older pending task goes first", with(base(task("t", "full", druidv1alpha1.TaskStatePending)), func(o *Observed) {
			o.Others = []druidv1alpha1.EtcdOpsTask{task("a-older", "delta", "")}
		}), ActionTransition, RuleRejectDuplicate, druidv1alpha1.TaskStateRejected},
		{"a younger pending task does not hold this one", with(base(task("t", "full", druidv1alpha1.TaskStatePending)), func(o *Observed) {
			o.Others = []druidv1alpha1.EtcdOpsTask{task("z-younger", "delta", druidv1alpha1.TaskStatePending)}
		}), ActionTransition, RuleAdmit, druidv1alpha1.TaskStateInProgress},
		{"finished tasks and other Etcds' do not hold it", with(base(task("t", "full", druidv1alpha1.TaskStatePending)), func(o *Observed) {
			other := task("a", "full", druidv1alpha1.TaskStateInProgress)
			other.Spec.EtcdName = ptr.To("other")
			o.Others = []druidv1alpha1.EtcdOpsTask{task("b", "full", druidv1alpha1.TaskStateSucceeded), other, o.Task}
		}), ActionTransition, RuleAdmit, druidv1alpha1.TaskStateInProgress},
		{"full requested", base(full), ActionRequest, RuleRequest, ""},
		{"request overwritten by another: asked again", with(base(full), func(o *Observed) { o.Lease.Requested, o.Lease.Handled = "other", "other" }),
			ActionRequest, RuleRequest, ""},
		{"waiting for the agent", with(base(full), func(o *Observed) { o.Lease.Requested = req }), ActionWait, RuleWaitSnapshot, ""},
		{"full handled", with(base(full), func(o *Observed) { o.Lease.Requested, o.Lease.Handled, o.Lease.Key = req, req, "v2/Full-1" }),
			ActionTransition, RuleSucceeded, druidv1alpha1.TaskStateSucceeded},
		{"a delta task reads the delta annotations", with(base(delta), func(o *Observed) { o.Lease.Requested, o.Lease.Handled = req, req }),
			ActionRequest, RuleRequest, ""},
		{"delta handled", with(base(delta), func(o *Observed) { o.Lease.DeltaRequested, o.Lease.DeltaHandled = req, req }),
			ActionTransition, RuleSucceeded, druidv1alpha1.TaskStateSucceeded},
		{"delta timeout (60s default)", with(base(delta), func(o *Observed) { o.Lease.DeltaRequested = req; o.Now = t0.Add(time.Minute) }),
			ActionTransition, RuleFailTimeout, druidv1alpha1.TaskStateFailed},
		{"full within its 480s default", with(base(full), func(o *Observed) { o.Lease.Requested = req; o.Now = t0.Add(479 * time.Second) }),
			ActionWait, RuleWaitSnapshot, ""},
		{"full timeout set in the spec", with(base(full), func(o *Observed) {
			o.Task.Spec.Config.OnDemandSnapshot.TimeoutSecondsFull = ptr.To(int32(5))
		}), ActionTransition, RuleFailTimeout, druidv1alpha1.TaskStateFailed},
		{"handled at the deadline still succeeds", with(base(delta), func(o *Observed) {
			o.Lease.DeltaRequested, o.Lease.DeltaHandled = req, req
			o.Now = t0.Add(time.Hour)
		}), ActionTransition, RuleSucceeded, druidv1alpha1.TaskStateSucceeded},
		{"lease not there yet", with(base(full), func(o *Observed) { o.Lease = nil }), ActionWait, RuleWaitLease, ""},
		{"Etcd deleted", with(base(full), func(o *Observed) { o.Etcd = nil }), ActionTransition, RuleFailEtcdGone, druidv1alpha1.TaskStateFailed},
		{"store removed", with(base(full), func(o *Observed) { o.BackupEnabled = false }), ActionTransition, RuleFailNoStore, druidv1alpha1.TaskStateFailed},
		{"finished, kept for its TTL", base(task("t", "full", druidv1alpha1.TaskStateSucceeded)), ActionWait, RuleFinished, ""},
		{"finished, TTL over (3600s default)", with(base(task("t", "full", druidv1alpha1.TaskStateRejected)), func(o *Observed) { o.Now = t0.Add(time.Hour) }),
			ActionDelete, RuleExpired, ""},
		{"finished, TTL from the spec", with(base(task("t", "full", druidv1alpha1.TaskStateFailed)), func(o *Observed) {
			o.Task.Spec.TTLSecondsAfterFinished = ptr.To(int32(10))
		}), ActionDelete, RuleExpired, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Decide(tt.o)
			if d.Action != tt.action || d.Rule != tt.rule || d.State != tt.state || d.Reason == "" {
				t.Fatalf("Decide = %+v, want %s %s by %s", d, tt.action, tt.state, tt.rule)
			}
			if d.Action == ActionWait && d.RequeueAfter <= 0 {
				t.Fatalf("a wait without a requeue: %+v", d)
			}
			if d.Action == ActionRequest {
				want := memberlease.AnnotationFullSnapshotRequest
				if Kind(&tt.o.Task) == druidv1alpha1.OnDemandSnapshotTypeDelta {
					want = memberlease.AnnotationDeltaSnapshotRequest
				}
				if d.LeaseAnnotation != want || d.Request != req {
					t.Fatalf("request %s=%s, want %s=%s", d.LeaseAnnotation, d.Request, want, req)
				}
			}
			if (d.State == druidv1alpha1.TaskStateRejected || d.State == druidv1alpha1.TaskStateFailed) != (d.ErrorCode != "") {
				t.Fatalf("error code %q with state %s", d.ErrorCode, d.State)
			}
		})
	}
}

// Every state leads only where etcd-druid's state machine goes, and no unfinished task is left
// without a next look.
func TestDecideTransitionsFollowTheStateMachine(t *testing.T) {
	allowed := map[druidv1alpha1.TaskState][]druidv1alpha1.TaskState{
		"":                                {druidv1alpha1.TaskStatePending},
		druidv1alpha1.TaskStatePending:    {druidv1alpha1.TaskStateInProgress, druidv1alpha1.TaskStateRejected},
		druidv1alpha1.TaskStateInProgress: {druidv1alpha1.TaskStateSucceeded, druidv1alpha1.TaskStateFailed},
	}
	etcd := &druidv1alpha1.Etcd{ObjectMeta: metav1.ObjectMeta{Name: "main", Namespace: "ns"}}
	for _, state := range []druidv1alpha1.TaskState{"", druidv1alpha1.TaskStatePending, druidv1alpha1.TaskStateInProgress,
		druidv1alpha1.TaskStateSucceeded, druidv1alpha1.TaskStateFailed, druidv1alpha1.TaskStateRejected} {
		for _, kind := range []druidv1alpha1.OnDemandSnapshotType{"full", "delta"} {
			for _, hasEtcd := range []bool{true, false} {
				for _, store := range []bool{true, false} {
					for _, lease := range []string{"none", "empty", "requested", "handled"} {
						for _, after := range []time.Duration{0, 30 * time.Second, 10 * time.Minute, 2 * time.Hour} {
							tk := task("t", kind, state)
							o := Observed{Task: tk, BackupEnabled: store, Now: t0.Add(after)}
							if hasEtcd {
								o.Etcd = etcd
							}
							req := RequestValue(&tk)
							switch lease {
							case "empty":
								o.Lease = &memberlease.SnapshotLeaseRecord{}
							case "requested":
								o.Lease = &memberlease.SnapshotLeaseRecord{Requested: req, DeltaRequested: req}
							case "handled":
								o.Lease = &memberlease.SnapshotLeaseRecord{Requested: req, Handled: req, DeltaRequested: req, DeltaHandled: req}
							}
							d := Decide(o)
							switch d.Action {
							case ActionTransition:
								ok := false
								for _, s := range allowed[state] {
									ok = ok || s == d.State
								}
								if !ok {
									t.Fatalf("%s → %s by %s (%+v)", state, d.State, d.Rule, o)
								}
								next := NextStatus(tk.Status, d, o.Now)
								if *next.State != d.State || next.LastOperation == nil || next.Phase == nil ||
									(d.State == druidv1alpha1.TaskStateInProgress && next.StartedAt == nil) {
									t.Fatalf("NextStatus = %+v for %+v", next, d)
								}
							case ActionDelete:
								if !state.Finished() {
									t.Fatalf("an unfinished task (%s) deleted by %s", state, d.Rule)
								}
							case ActionWait, ActionRequest:
								if d.RequeueAfter <= 0 {
									t.Fatalf("%s by %s without a requeue", d.Action, d.Rule)
								}
								if d.Action == ActionRequest && state != druidv1alpha1.TaskStateInProgress {
									t.Fatalf("a request from state %q", state)
								}
							default:
								t.Fatalf("unknown action %+v", d)
							}
						}
					}
				}
			}
		}
	}
}

func TestNextStatus(t *testing.T) {
	tk := task("t", "full", druidv1alpha1.TaskStatePending)
	for range 12 {
		tk.Status.LastErrors = append(tk.Status.LastErrors, druidv1alpha1.LastError{Code: "OLD"})
	}
	now := t0.Add(time.Minute)
	d := Decision{Action: ActionTransition, Rule: RuleRejectDuplicate, State: druidv1alpha1.TaskStateRejected,
		Phase: druidv1alpha1.OperationPhaseAdmit, OpState: OpFailed, ErrorCode: ErrDuplicateTask, Reason: "another runs"}
	s := NextStatus(tk.Status, d, now)
	if len(s.LastErrors) != MaxLastErrors || s.LastErrors[MaxLastErrors-1].Code != ErrDuplicateTask {
		t.Fatalf("lastErrors %+v: want the latest %d, the new one last", s.LastErrors, MaxLastErrors)
	}
	if !s.LastTransitionTime.Time.Equal(now) || s.StartedAt != nil || *s.Phase != druidv1alpha1.OperationPhaseAdmit ||
		s.LastOperation.State != OpFailed || s.LastOperation.Type != "Admit" || s.LastOperation.Description != "another runs" {
		t.Fatalf("NextStatus = %+v", s)
	}
	if len(tk.Status.LastErrors) != 12 {
		t.Fatal("NextStatus changed the old status")
	}
	// The same state again keeps its transition time.
	same := NextStatus(s, d, now.Add(time.Minute))
	if !same.LastTransitionTime.Time.Equal(now) {
		t.Fatalf("lastTransitionTime moved without a state change: %v", same.LastTransitionTime)
	}
}

func TestIsFinalIsAcceptedAndSaid(t *testing.T) {
	tk := task("t", "full", druidv1alpha1.TaskStatePending)
	tk.Spec.Config.OnDemandSnapshot.IsFinal = ptr.To(true)
	d := Decide(Observed{Task: tk, Etcd: &druidv1alpha1.Etcd{}, BackupEnabled: true, Now: t0})
	if d.Rule != RuleAdmit || !strings.Contains(d.Reason, "isFinal") {
		t.Fatalf("Decide = %+v, want admitted with isFinal explained", d)
	}
}
