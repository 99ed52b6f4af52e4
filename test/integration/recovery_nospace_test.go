package integration

import (
	"encoding/json"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/etcd-conductor/etcd-conductor/internal/contract/memberlease"
	recoveryplan "github.com/etcd-conductor/etcd-conductor/internal/decide/recovery"
	"github.com/etcd-conductor/etcd-conductor/internal/member/agent"
)

// TestRecoveryShowsARestoreShortOfSpace: the member ordered to restore reports that the restore
// does not fit its volume; the Etcd's RecoveryInProgress condition and a Warning Event say how
// much it needs and how much is free. A report of another pod incarnation shows nothing.
func TestRecoveryShowsARestoreShortOfSpace(t *testing.T) {
	ns := testNamespace("recovery-no-space")
	r, stop, _ := newRecoveryRig(t, ns)
	for _, i := range []int{1, 2} {
		if err := stop(i); err != nil {
			t.Fatal(err)
		}
	}
	r.quorumLost(time.Now().Add(-time.Minute))
	pods := map[string]*corev1.Pod{}
	for _, name := range []string{"etcd-main-1", "etcd-main-2"} {
		pods[name] = r.initWaiting(name)
		r.report(name, string(pods[name].UID), memberlease.DataEmpty)
	}
	order := r.decides(t, recoveryplan.RuleStart.CamelCase()).Status.Recovery
	if order == nil || order.Member != "etcd-main-1" {
		t.Fatalf("order %+v, want etcd-main-1 to restore", order)
	}
	shortOfSpace := func(podUID string) {
		t.Helper()
		d := agent.StartDecision{Rule: agent.StartRuleRestoreNoSpace, Reason: "restore needs 2147483648 bytes (2.0 GiB), the volume of /var/etcd/data has 1073741824 bytes (1.0 GiB) free",
			NoSpace: &memberlease.SpaceShortage{Dir: "/var/etcd/data", Need: 2 << 30, Free: 1 << 30}}
		raw, err := json.Marshal(memberlease.StartReport{PodUID: podUID, Rule: d.Rule, Data: memberlease.DataEmpty, NoSpace: d.NoSpace})
		if err != nil {
			t.Fatal(err)
		}
		r.annotate(order.Member, map[string]any{
			memberlease.AnnotationStartReport:   string(raw),
			memberlease.AnnotationStartDecision: memberlease.FormatStartDecision(d.Rule, d.Reason),
		})
	}

	t.Run("a report of another incarnation shows nothing", func(t *testing.T) {
		shortOfSpace("uid-of-an-earlier-pod")
		r.decides(t, recoveryplan.RuleRestoring.CamelCase())
	})
	t.Run("the restoring pod's report is the condition and a Warning Event", func(t *testing.T) {
		shortOfSpace(order.PodUID)
		want := []string{"etcd-main-1 cannot restore", "restore needs 2147483648 bytes, volume has 1073741824 free", "grow the member's volume"}
		got := r.decides(t, recoveryplan.RuleRestoreNoSpace.CamelCase(), want...)
		if got.Status.Recovery == nil || got.Status.Recovery.Token != order.Token {
			t.Errorf("order %+v, want it kept while the volume is too small", got.Status.Recovery)
		}
		eventWithReason(t, r.env, ns, r.etcd.Name, recoveryplan.RuleRestoreNoSpace.CamelCase(), want...)
	})
}
