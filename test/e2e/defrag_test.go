package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-conductor/etcd-conductor/internal/controller/defrag"
	"github.com/etcd-conductor/etcd-conductor/test/framework"
	"github.com/etcd-conductor/etcd-conductor/test/stack"
	"github.com/etcd-conductor/etcd-conductor/test/workload"
)

// TestScheduledDefragmentationUnderLoad: a 3-member cluster with 8 MiB of deleted, compacted keys
// gets a defragmentation schedule of every minute while the writer puts keys at 40/s. The run
// must defragment all three members one at a time (leader last), shrink their databases, keep a
// quorum the whole time and lose no acknowledged write.
func TestScheduledDefragmentationUnderLoad(t *testing.T) {
	s := sharedStack(t)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	cluster, e := startCluster(ctx, t, s, "e2e-defrag-")
	ns := cluster.Namespace
	makeGarbage(ctx, t, cluster.Endpoints()()[0], cluster.PKI.ClientMaterial().Config)

	rec := startRecorder(ctx, t, cluster, 3)
	time.Sleep(time.Second)
	etcd, err := cluster.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	etcd.Spec.Etcd.DefragmentationSchedule = ptr.To("* * * * *")
	if err := s.Client.Update(ctx, etcd); err != nil {
		t.Fatal(err)
	}
	scheduled := time.Now()

	var defragmented []string
	at := map[string]time.Duration{} // when each Defragmented Event was recorded, after the schedule was set
	// The run's window, from its Events (second resolution): the cron waits for the next minute
	// first, and what the instruments see in that wait is not the defragmentation's.
	var firstDefrag, doneAt time.Time
	e.waitFor(ctx, "a completed defragmentation run", func(ctx context.Context) (bool, error) {
		events := &corev1.EventList{}
		if err := s.Client.List(ctx, events, client.InNamespace(ns)); err != nil {
			return false, err
		}
		defragmented = defragmented[:0]
		done := false
		for _, ev := range events.Items {
			switch ev.Reason {
			case defrag.EventDefragmented:
				defragmented = append(defragmented, ev.Message)
				at[ev.Message] = ev.LastTimestamp.Sub(scheduled).Round(time.Second)
				if firstDefrag.IsZero() || ev.LastTimestamp.Time.Before(firstDefrag) {
					firstDefrag = ev.LastTimestamp.Time
				}
			case defrag.EventDefragmentationFailed, defrag.EventDefragmentationSkip:
				t.Errorf("%s: %s", ev.Reason, ev.Message)
			case defrag.EventDefragmentationDone:
				done = true
				doneAt = ev.LastTimestamp.Time
			}
		}
		return done, fmt.Errorf("%d members defragmented so far", len(defragmented))
	})
	took := time.Since(scheduled)
	time.Sleep(time.Second) // the writer shows the cluster serving after the leader's turn
	report, recErr := rec.Stop(ctx)
	t.Logf("figures defrag: scheduled-to-done=%s %s", took.Round(100*time.Millisecond), report.Summary())
	fmt.Printf("e2e %-28s done=%-6s quorumLossMs=%-6d longestWriteGapMs=%-6d failedWrites=%-4d ackedWrites=%-5d lost=%d leaderChanges=%d\n",
		"defrag-under-load", took.Round(100*time.Millisecond), report.QuorumLossMs, report.LongestWriteGapMs, report.FailedWrites,
		report.AckedWrites, report.LostAckedWrites, report.LeaderChanges)
	for _, m := range defragmented {
		t.Logf("Defragmented (at ~%s): %s", at[m], m)
	}
	// Event timestamps are truncated to the second and the first member's run starts before its
	// Event: the window opens 2 s before the first Event and closes 1 s after the run's end.
	windowStart, windowEnd := firstDefrag.Add(-2*time.Second), doneAt.Add(time.Second)
	var duringDefrag time.Duration
	for _, q := range report.QuorumLosses {
		start, end := q.Start, q.End
		if start.Before(windowStart) {
			start = windowStart
		}
		if end.After(windowEnd) {
			end = windowEnd
		}
		overlap := end.Sub(start)
		where := "outside the defragmentation window"
		if overlap > 0 {
			duringDefrag += overlap
			where = "during defragmentation"
		}
		t.Logf("quorum loss from %s after the schedule was set, for %d ms (%s)", q.Start.Sub(scheduled).Round(10*time.Millisecond), q.End.Sub(q.Start).Milliseconds(), where)
	}

	if recErr != nil {
		t.Errorf("recorder: %v", recErr)
	}
	if len(defragmented) != 3 {
		t.Errorf("%d Defragmented Events, want one per member", len(defragmented))
	}
	leaderTurns := 0
	for _, m := range defragmented {
		if strings.Contains(m, "[defrag/leader]") {
			leaderTurns++
		}
		var member string
		var before, after int64
		if _, err := fmt.Sscanf(m, "member %s db %d bytes -> %d bytes", &member, &before, &after); err != nil {
			t.Errorf("Defragmented Event %q: no sizes: %v", m, err)
			continue
		}
		if after*2 > before {
			t.Errorf("%s db %d -> %d bytes: want it at least halved (8 MiB of it was garbage)", member, before, after)
		}
	}
	if leaderTurns != 1 {
		t.Errorf("%d leader defragmentations in one run, want 1", leaderTurns)
	}
	if duringDefrag > 0 {
		t.Errorf("quorum lost for %d ms during defragmentation (%d ms in the whole run)", duringDefrag.Milliseconds(), report.QuorumLossMs)
	}
	if report.LostAckedWrites != 0 {
		t.Errorf("%d acknowledged writes lost: %v", report.LostAckedWrites, report.LostKeys)
	}
	if report.AckedWrites == 0 {
		t.Error("the writer got no write acknowledged: the measurement saw nothing")
	}
}

// startCluster starts the operator and a converged 3-member cluster in a namespace of its own
// (named from prefix), deleted when the test ends.
func startCluster(ctx context.Context, t *testing.T, s *stack.Stack, prefix string) (*stack.EtcdCluster, *env) {
	t.Helper()
	framework.StartOperator(t, s.Cluster.RESTConfig(), operatorDefaults)
	e := &env{t: t, stack: s}
	return createCluster(ctx, e, prefix, 3), e
}

// makeGarbage writes 8 MiB through one member, deletes it and compacts, so every member's database
// holds free pages a defragmentation gives back.
func makeGarbage(ctx context.Context, t *testing.T, ep workload.Endpoint, tlsConfig func(string) (*tls.Config, error)) {
	t.Helper()
	kv := pb.NewKVClient(dialMember(t, ep, tlsConfig))
	value := make([]byte, 8<<10)
	for i := 0; i < 1024; i++ {
		if _, err := kv.Put(ctx, &pb.PutRequest{Key: fmt.Appendf(nil, "garbage/%04d", i), Value: value}); err != nil {
			t.Fatalf("filling: %v", err)
		}
	}
	del, err := kv.DeleteRange(ctx, &pb.DeleteRangeRequest{Key: []byte("garbage/"), RangeEnd: []byte("garbage0")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Compact(ctx, &pb.CompactionRequest{Revision: del.GetHeader().GetRevision(), Physical: true}); err != nil {
		t.Fatal(err)
	}
}

// dialMember opens a connection to one member that verifies its DNS name; closed at the test's end.
func dialMember(t *testing.T, ep workload.Endpoint, tlsConfig func(string) (*tls.Config, error)) *grpc.ClientConn {
	t.Helper()
	cfg, err := tlsConfig(ep.ServerName)
	if err != nil {
		t.Fatal(err)
	}
	transport := insecure.NewCredentials() // a nil configuration: the member serves plain HTTP
	if cfg != nil {
		transport = credentials.NewTLS(cfg)
	}
	cc, err := grpc.NewClient(ep.Address, grpc.WithTransportCredentials(transport), grpc.WithAuthority(ep.ServerName))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}
