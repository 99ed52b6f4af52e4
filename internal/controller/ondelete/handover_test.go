package ondelete

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/etcd-conductor/etcd-conductor/internal/roles"
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
