package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"sort"
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

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/controller/defrag"
	"github.com/etcd-conductor/etcd-conductor/test/framework"
	scenariopkg "github.com/etcd-conductor/etcd-conductor/test/scenario"
	"github.com/etcd-conductor/etcd-conductor/test/stack"
	"github.com/etcd-conductor/etcd-conductor/test/workload"
)

// TestScheduledDefragmentationUnderLoad: a 3-member cluster with 8 MiB of deleted, compacted keys
// gets a defragmentation schedule of every minute while the writer puts keys at 40/s. The run
// must defragment all three members one at a time (leader last), shrink their databases, keep a
// quorum the whole time and lose no acknowledged write.
func TestScheduledDefragmentationUnderLoad(t *testing.T) {
	runDefrag(t, defragRun{})
}

// defragRun is how TestScheduledDefragmentationUnderLoad runs: as it is, or with a fault once
// the first member is defragmented (the operation × fault matrix's defragmentation row).
type defragRun struct {
	// fault acts once the first Defragmented Event is out, with the members defragmented so far,
	// and returns once the fault is lifted, with the pod it was put on ("" none): that member's
	// defragmentation may fail for the fault's sake. The run is then judged by promise, and it
	// must complete after the fault was lifted; the operator may have started the schedule's run
	// afresh (a restarted operator forgets the run in progress), so members may be defragmented
	// more than once.
	fault   func(ctx context.Context, e *env, defragmented []string) (victim string)
	promise scenariopkg.Promise
	// backup backs the cluster up to a real S3 server (e.backup); apiLink starts the operator
	// behind a link a fault can cut (e.apiLink).
	backup, apiLink bool
	// record, when set, receives the figures.
	record func(matrixFigures)
}

// defragPromise: a run no fault disturbs keeps the quorum; it moves no leadership on purpose, but
// the leader's turn blocks it for the call, which the count does not promise against.
var defragPromise = scenariopkg.Promise{NoQuorumLoss: true, LeaderChanges: scenariopkg.AnyLeaderChanges,
	Waived: "the leader's turn blocks the leader for its defragmentation: leadership is not moved on purpose, nor promised to stay"}

// defragEvents is what the defragmentation controller said on the cluster's namespace.
type defragEvents struct {
	// defragmented: each Defragmented Event's message, oldest first, with its member and time.
	defragmented []defragEvent
	failed       []defragEvent
	skipped      []string
	waits        []string
	// dones are the DefragmentationCompleted Events' times.
	dones []time.Time
}

type defragEvent struct {
	member, message string
	at              time.Time
}

func readDefragEvents(ctx context.Context, s *stack.Stack, namespace string) (defragEvents, error) {
	events := &corev1.EventList{}
	if err := s.Client.List(ctx, events, client.InNamespace(namespace)); err != nil {
		return defragEvents{}, err
	}
	sort.SliceStable(events.Items, func(i, j int) bool { return events.Items[i].LastTimestamp.Before(&events.Items[j].LastTimestamp) })
	var out defragEvents
	for _, ev := range events.Items {
		var member string
		_, _ = fmt.Sscanf(ev.Message, "member %s", &member)
		de := defragEvent{member: strings.TrimSuffix(member, ":"), message: ev.Message, at: ev.LastTimestamp.Time}
		switch ev.Reason {
		case defrag.EventDefragmented:
			out.defragmented = append(out.defragmented, de)
		case defrag.EventDefragmentationFailed:
			out.failed = append(out.failed, de)
		case defrag.EventDefragmentationSkip:
			out.skipped = append(out.skipped, ev.Message)
		case defrag.EventDefragmentationWait:
			out.waits = append(out.waits, ev.Message)
		case defrag.EventDefragmentationDone:
			out.dones = append(out.dones, ev.LastTimestamp.Time)
		}
	}
	return out, nil
}

func runDefrag(t *testing.T, run defragRun) {
	s := sharedStack(t)
	timeout := 6 * time.Minute
	promise := defragPromise
	if run.fault != nil {
		// The fault may cost the run in progress; the schedule's next one is a minute later.
		timeout = 9 * time.Minute
		promise = run.promise
	}
	if err := promise.Validate(); err != nil {
		t.Fatalf("defragmentation: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	opts := operatorDefaults
	if run.apiLink {
		opts.APIServerLink = framework.NewAPIServerLink()
	}
	e := &env{t: t, stack: s, opts: opts, apiLink: opts.APIServerLink}
	e.operator = framework.StartOperator(t, s.Cluster.RESTConfig(), opts)
	var cluster *stack.EtcdCluster
	if run.backup {
		e.backup = createBackedUpCluster(ctx, e, "e2e-defrag-", 3)
		cluster = e.cluster
		e.waitFor(ctx, "BackupReady True before the schedule", backupReadyIs(cluster, druidv1alpha1.ConditionTrue))
	} else {
		cluster = createCluster(ctx, e, "e2e-defrag-", 3)
	}
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

	var evs defragEvents
	read := func(ctx context.Context) error {
		var err error
		evs, err = readDefragEvents(ctx, s, ns)
		return err
	}
	// The run must complete after the fault is lifted; Event times are truncated to the second.
	completeAfter, victim := scheduled.Add(-time.Second), ""
	if run.fault != nil {
		e.waitFor(ctx, "the first member defragmented", func(ctx context.Context) (bool, error) {
			return read(ctx) == nil && len(evs.defragmented) > 0, nil
		})
		var names []string
		for _, d := range evs.defragmented {
			names = append(names, d.member)
		}
		t.Logf("fault after %s defragmented (%s after the schedule was set)", strings.Join(names, ", "), time.Since(scheduled).Round(100*time.Millisecond))
		victim = run.fault(ctx, e, names)
		completeAfter = time.Now().Truncate(time.Second)
	}
	var doneAt time.Time
	e.waitFor(ctx, "a completed defragmentation run", func(ctx context.Context) (bool, error) {
		if err := read(ctx); err != nil {
			return false, err
		}
		for _, d := range evs.dones {
			if !d.Before(completeAfter) {
				doneAt = d
				return true, nil
			}
		}
		return false, fmt.Errorf("%d members defragmented so far", len(evs.defragmented))
	})
	took := time.Since(scheduled)
	time.Sleep(time.Second) // the writer shows the cluster serving after the leader's turn
	report, recErr := rec.Stop(ctx)
	if err := read(ctx); err != nil {
		t.Fatal(err)
	}
	// The run's window, from its Events (second resolution): the cron waits for the next minute
	// first, and what the instruments see in that wait is not the defragmentation's. The first
	// member's run starts before its Event: the window opens 2 s before the first Event and
	// closes 1 s after the run's end.
	if len(evs.defragmented) == 0 {
		t.Fatalf("the run completed with no member defragmented")
	}
	windowStart, windowEnd := evs.defragmented[0].at.Add(-2*time.Second), doneAt.Add(time.Second)
	t.Logf("figures defrag: scheduled-to-done=%s %s", took.Round(100*time.Millisecond), report.Summary())
	windowed := report
	windowed.QuorumLosses, windowed.QuorumLossMs = nil, 0
	for _, q := range report.QuorumLosses {
		start, end := q.Start, q.End
		if start.Before(windowStart) {
			start = windowStart
		}
		if end.IsZero() || end.After(windowEnd) {
			end = windowEnd
		}
		where := "outside the defragmentation window"
		if overlap := end.Sub(start); overlap > 0 {
			windowed.QuorumLossMs += overlap.Milliseconds()
			windowed.QuorumLosses = append(windowed.QuorumLosses, workload.Interval{Start: start, End: end, Ms: overlap.Milliseconds(), MinParticipating: q.MinParticipating})
			where = "during defragmentation"
		}
		t.Logf("quorum loss from %s after the schedule was set, for %d ms (%s)", q.Start.Sub(scheduled).Round(10*time.Millisecond), q.Ms, where)
	}
	fmt.Printf("e2e %-28s done=%-6s quorumLossMs=%-6d (during defragmentation %d) longestWriteGapMs=%-6d failedWrites=%-4d ackedWrites=%-5d lost=%d leaderChanges=%d\n",
		"defrag-under-load", took.Round(100*time.Millisecond), report.QuorumLossMs, windowed.QuorumLossMs, report.LongestWriteGapMs, report.FailedWrites,
		report.AckedWrites, report.LostAckedWrites, report.LeaderChanges)
	if run.record != nil {
		run.record(matrixFigures{quorumLossMs: windowed.QuorumLossMs, lost: report.LostAckedWrites, leaderChanges: report.LeaderChanges,
			took: took, linearizable: report.LinearizabilityError == "", completed: true})
	}
	for _, d := range evs.defragmented {
		t.Logf("Defragmented (at ~%s): %s", d.at.Sub(scheduled).Round(time.Second), d.message)
	}
	for _, w := range evs.waits {
		t.Logf("DefragmentationWaiting: %s", w)
	}

	checkWrites(t, report, recErr)
	if report.LinearizabilityError != "" {
		t.Errorf("history not linearizable: %s", report.LinearizabilityError)
	}
	checkPromise(t, promise, windowed)
	for _, m := range evs.skipped {
		t.Errorf("%s: %s", defrag.EventDefragmentationSkip, m)
	}
	// A member's defragmentation may fail only where the fault was, and only for its sake.
	failedForTheFault := map[string]bool{}
	for _, f := range evs.failed {
		if f.member != "" && f.member == victim {
			failedForTheFault[f.member] = true
			t.Logf("%s of the faulted member: %s", defrag.EventDefragmentationFailed, f.message)
			continue
		}
		t.Errorf("%s: %s", defrag.EventDefragmentationFailed, f.message)
	}
	leaderTurns := 0
	first := map[string]bool{}
	for _, d := range evs.defragmented {
		if strings.Contains(d.message, "[defrag/leader]") {
			leaderTurns++
		}
		var member string
		var before, after int64
		if _, err := fmt.Sscanf(d.message, "member %s db %d bytes -> %d bytes", &member, &before, &after); err != nil {
			t.Errorf("Defragmented Event %q: no sizes: %v", d.message, err)
			continue
		}
		// A member defragmented again in a later run has nothing more to give back.
		if !first[d.member] && after*2 > before {
			t.Errorf("%s db %d -> %d bytes: want it at least halved (8 MiB of it was garbage)", member, before, after)
		}
		first[d.member] = true
	}
	if run.fault == nil {
		if len(evs.defragmented) != 3 {
			t.Errorf("%d Defragmented Events, want one per member", len(evs.defragmented))
		}
		if leaderTurns != 1 {
			t.Errorf("%d leader defragmentations in one run, want 1", leaderTurns)
		}
	} else {
		for i := 0; i < 3; i++ {
			if name := cluster.PodName(i); !first[name] && !failedForTheFault[name] {
				t.Errorf("member %s never defragmented", name)
			}
		}
		// The leader goes last in each run, once a run.
		if leaderTurns < 1 || leaderTurns > len(evs.dones) {
			t.Errorf("%d leader defragmentations in %d completed runs, want one a run", leaderTurns, len(evs.dones))
		}
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
