package workload

import (
	"context"
	"errors"
	"strings"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ErrorClass groups failed requests by what they say about the cluster.
type ErrorClass string

const (
	// ClassDeadline: no answer within the per-request deadline (member down, partitioned,
	// or a request in flight while leadership moved).
	ClassDeadline ErrorClass = "deadline"
	// ClassUnavailable: the connection to the member is down (refused, reset, TLS).
	ClassUnavailable ErrorClass = "unavailable"
	// ClassNoLeader: the member answered but has no leader.
	ClassNoLeader ErrorClass = "no-leader"
	// ClassLeaderChanged: the request was dropped because leadership moved.
	ClassLeaderChanged ErrorClass = "leader-changed"
	// ClassServerTimeout: the member gave up on the request itself ("request timed out").
	ClassServerTimeout ErrorClass = "server-timeout"
	// ClassStopped: the member is shutting down.
	ClassStopped ErrorClass = "stopped"
	// ClassNotReady: a /readyz probe answered, but not "ok".
	ClassNotReady ErrorClass = "not-ready"
	// ClassNoEndpoints: the endpoints function returned no member to try.
	ClassNoEndpoints ErrorClass = "no-endpoints"
	// ClassDial: no connection could be set up (bad address or TLS material).
	ClassDial ErrorClass = "dial"
	// ClassCanceled: the instrument was stopped while the request was in flight.
	ClassCanceled ErrorClass = "canceled"
	// ClassOther is anything else.
	ClassOther ErrorClass = "other"
)

// classify maps an error of a gRPC or HTTP request to a member onto an ErrorClass.
func classify(err error) ErrorClass {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, context.DeadlineExceeded):
		return ClassDeadline
	case errors.Is(err, context.Canceled):
		return ClassCanceled
	}
	var notReady *notReadyError
	if errors.As(err, &notReady) {
		return ClassNotReady
	}
	// The innermost gRPC status, not status.FromError: that one folds our wrapping context into
	// the message, which then matches none of etcd's.
	var withStatus interface{ GRPCStatus() *status.Status }
	if !errors.As(err, &withStatus) {
		// HTTP probes: connection errors end up here.
		if strings.Contains(err.Error(), "connection refused") || strings.Contains(err.Error(), "connection reset") {
			return ClassUnavailable
		}
		return ClassOther
	}
	s := withStatus.GRPCStatus()
	switch s.Message() {
	case rpctypes.ErrorDesc(rpctypes.ErrGRPCNoLeader):
		return ClassNoLeader
	case rpctypes.ErrorDesc(rpctypes.ErrGRPCLeaderChanged):
		return ClassLeaderChanged
	case rpctypes.ErrorDesc(rpctypes.ErrGRPCStopped):
		return ClassStopped
	case rpctypes.ErrorDesc(rpctypes.ErrGRPCTimeout),
		rpctypes.ErrorDesc(rpctypes.ErrGRPCTimeoutDueToLeaderFail),
		rpctypes.ErrorDesc(rpctypes.ErrGRPCTimeoutDueToConnectionLost):
		return ClassServerTimeout
	}
	switch s.Code() {
	case codes.DeadlineExceeded:
		return ClassDeadline
	case codes.Canceled:
		return ClassCanceled
	case codes.Unavailable:
		return ClassUnavailable
	}
	return ClassOther
}
