package ondelete

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/etcd-conductor/etcd-conductor/internal/decide/roles"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/rollout"
)

func TestHandoverOutcome(t *testing.T) {
	cases := []struct {
		err  error
		want string
	}{
		{nil, HandoverSucceeded},
		{&unconfirmedError{to: "etcd-main-2", last: "1 of 3 follow", timeout: time.Second}, HandoverUnconfirmed},
		{fmt.Errorf("cluster x: %w", context.DeadlineExceeded), HandoverTimedOut},
		{fmt.Errorf("cluster x: %w", fmt.Errorf("move leader: %w", status.Error(codes.DeadlineExceeded, "context deadline exceeded"))), HandoverTimedOut},
		{errors.New("move leader from etcd-main-0 to 2: rpc error: code = Unavailable desc = etcdserver: request timed out, leader transfer took too long"), HandoverTimedOut},
		{errors.New("rpc error: code = FailedPrecondition desc = etcdserver: not leader"), HandoverFailed},
		{errors.New("rpc error: code = FailedPrecondition desc = etcdserver: bad leader transferee"), HandoverFailed},
	}
	for _, tc := range cases {
		if got := handoverOutcome(tc.err); got != tc.want {
			t.Errorf("handoverOutcome(%v) = %s, want %s", tc.err, got, tc.want)
		}
	}
}

func TestMemberID(t *testing.T) {
	reports := []roles.MemberReport{{Name: "etcd-main-0", ID: "8e9e05c52164694d"}, {Name: "etcd-main-1", ID: ""}}
	if id, err := memberID(reports, "etcd-main-0"); err != nil || id != 0x8e9e05c52164694d {
		t.Errorf("memberID(etcd-main-0) = %x, %v", id, err)
	}
	for _, name := range []string{"etcd-main-1", "etcd-main-2"} {
		if _, err := memberID(reports, name); err == nil {
			t.Errorf("memberID(%s) found an ID", name)
		}
	}
}

// TestRememberedFailuresReachThePlanner: a failure that could not be written to the pod still
// counts, with its targets, for that pod only, and is forgotten with the pod.
func TestRememberedFailuresReachThePlanner(t *testing.T) {
	f := handoverFailures{byCluster: map[string]map[types.UID]failedRecord{}}
	leader := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "etcd-main-0", UID: "u0", Annotations: map[string]string{
		rollout.AnnotationHandoverFailures: "1", rollout.AnnotationHandoverFailedTo: "etcd-main-1"}}}
	other := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "etcd-main-1", UID: "u1"}}
	f.record("shoot/etcd-main", "u0", failedRecord{count: 3, to: []string{"etcd-main-1", "etcd-main-2"}})
	f.record("shoot/etcd-main", "u0", failedRecord{count: 2, to: []string{"etcd-main-1"}}) // a late, older record
	got := f.apply("shoot/etcd-main", []corev1.Pod{leader, other})
	if failuresOf(got, "etcd-main-0") != 3 || failuresOf(got, "etcd-main-1") != 0 {
		t.Fatalf("failures after apply: %v, %v", got[0].Annotations, got[1].Annotations)
	}
	if to := rollout.HandoverFailedTo(&got[0]); !slices.Equal(to, []string{"etcd-main-1", "etcd-main-2"}) {
		t.Errorf("failed targets after apply: %v", to)
	}
	if leader.Annotations[rollout.AnnotationHandoverFailures] != "1" {
		t.Errorf("apply changed the pod read from the apiserver")
	}
	if got := f.apply("shoot/other", []corev1.Pod{other}); failuresOf(got, "etcd-main-1") != 0 || len(f.byCluster["shoot/etcd-main"]) != 1 {
		t.Errorf("another cluster's pods changed what is remembered")
	}
	replaced := leader
	replaced.UID = "u0-new"
	replaced.Annotations = nil
	if got := f.apply("shoot/etcd-main", []corev1.Pod{replaced, other}); failuresOf(got, "etcd-main-0") != 0 || len(f.byCluster["shoot/etcd-main"]) != 0 {
		t.Errorf("the new pod inherited the old one's failures")
	}
}

// TestHandoverTimesExplainLeaseLag: a role mismatch is expected only shortly after a handover
// confirmed in the same cluster.
func TestHandoverTimesExplainLeaseLag(t *testing.T) {
	var h handoverTimes
	at := time.Date(2026, 11, 23, 1, 0, 0, 0, time.UTC)
	h.record("ns/a", at)
	for _, tc := range []struct {
		name    string
		cluster string
		now     time.Time
		want    bool
	}{
		{"same cluster, within a renewal", "ns/a", at.Add(3 * time.Second), true},
		{"same cluster, after the leases caught up", "ns/a", at.Add(leaseCatchUp), false},
		{"another cluster", "ns/b", at.Add(time.Second), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := h.within(tc.cluster, tc.now, leaseCatchUp); got != tc.want {
				t.Errorf("within(%s, +%s) = %v, want %v", tc.cluster, tc.now.Sub(at), got, tc.want)
			}
		})
	}
}
