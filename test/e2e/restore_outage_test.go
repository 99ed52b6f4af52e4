package e2e

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/contract/memberlease"
	"github.com/etcd-conductor/etcd-conductor/internal/contract/snapshot"
	"github.com/etcd-conductor/etcd-conductor/internal/member/agent"
	"github.com/etcd-conductor/etcd-conductor/test/framework"
	"github.com/etcd-conductor/etcd-conductor/test/s3server"
)

// storeOutagesEnv lists the store outages TestRestoreThroughStoreOutage runs, as Go durations
// ("2m,6m"; "1h" for the long one). Unset: the test is skipped (make test); make soak sets it.
const storeOutagesEnv = "E2E_STORE_OUTAGES"

// outageDeltas is how many deltas the chain holds when the volume is lost, and throttleAllowed
// how many of them the store hands over before it answers SlowDown: the reproduction
// (a full snapshot, 12 deltas, the reads throttled after the first two).
const (
	outageDeltas    = 12
	throttleAllowed = 2
)

// TestRestoreThroughStoreOutage: a backed-up single-member Etcd loses its volume while the store
// answers 503 SlowDown to delta reads (after the first two) for a whole outage. The restore must
// not finish while the store refuses (no new cluster, no RestoreIncomplete: it fails and is
// tried again at every poll, whatever the outage's length), and once the store answers it must
// reach the chain's last delta: every acknowledged write the backup held is kept.
func TestRestoreThroughStoreOutage(t *testing.T) {
	spec := os.Getenv(storeOutagesEnv)
	if spec == "" {
		t.Skipf("%s is not set (make soak sets it, e.g. %s=2m,6m)", storeOutagesEnv, storeOutagesEnv)
	}
	for _, field := range strings.Split(spec, ",") {
		outage, err := time.ParseDuration(strings.TrimSpace(field))
		if err != nil || outage <= 0 {
			t.Fatalf("%s=%q: %q is not a positive duration", storeOutagesEnv, spec, field)
		}
		t.Run(outage.String(), func(t *testing.T) { restoreThroughOutage(t, outage) })
	}
}

func restoreThroughOutage(t *testing.T, outage time.Duration) {
	namespace, op := inParallel(t, "e2e-outage-", operatorDefaults)
	s := sharedStack(t)
	ctx, cancel := context.WithTimeout(context.Background(), outage+12*time.Minute)
	defer cancel()
	e := &env{t: t, stack: s, opts: operatorDefaults, operator: op}
	var throttle *s3server.Throttle
	b := createBackedUpClusterWith(ctx, e, namespace, framework.EtcdImage(fromVersion), 1, func(srv *s3server.Server, secret map[string][]byte, backup *druidv1alpha1.BackupSpec) {
		var err error
		if throttle, err = s3server.NewThrottle(srv, s.Network.GatewayIP()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { throttle.Close() })
		for k, v := range throttle.SecretData() {
			secret[k] = v
		}
		// One full snapshot at the start, then only deltas: the chain grows to outageDeltas
		// without a new full snapshot cutting it short.
		backup.FullSnapshotSchedule = ptr.To("0 0 1 1 *")
	})
	rec := startRecorder(ctx, t, b.cluster, 1)

	b.waitFor(ctx, "a chain of a full snapshot and "+strconv.Itoa(outageDeltas)+" deltas", func(ctx context.Context) (bool, error) {
		chain, err := b.chain(ctx)
		return err == nil && len(chain.Deltas) >= outageDeltas, err
	})
	// Only the member pods' reads: the operator's own (the status controller reads the last
	// delta's header) would otherwise hold the restore's order back, and the restore's reads
	// would never meet the outage. The in-process operator reaches the store from the gateway.
	host := s.Network.GatewayIP()
	throttle.SlowDown(func(key, client string) bool {
		return client != host && strings.Contains(key, string(snapshot.KindDelta)+"-")
	}, throttleAllowed)

	var want snapshot.Chain
	out := b.loseWith(ctx, "outage-"+outage.String(), rec, 1, func(ctx context.Context) {
		etcd, err := b.cluster.Get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		oldID := etcd.Status.ClusterID
		// The outage counts from the restore's first refused read (the new pod takes a while to
		// get there); throughout it the restore tries and fails, and nothing takes its place.
		wiped := time.Now()
		var first time.Time
		for (first.IsZero() || time.Since(first) < outage) && ctx.Err() == nil {
			if held, why := restoreHeld(ctx, b, oldID); !held {
				t.Fatalf("%s after the volume was lost, in a %s store outage: %s", time.Since(wiped).Round(time.Second), outage, why)
			}
			if first.IsZero() && throttle.Refused() > 0 {
				first = time.Now()
				t.Logf("the restore's first delta read refused %s after the volume was lost", first.Sub(wiped).Round(time.Second))
			}
			sleepCtx(ctx, 2*time.Second)
		}
		if first.IsZero() {
			t.Fatalf("no delta read was refused: the restore never tried (%v)", ctx.Err())
		}
		// What the store holds as the throttle lifts is what the restore must reach: the old
		// member is gone and the new one has not started, so nothing is added meanwhile.
		if want, err = b.chain(ctx); err != nil {
			t.Fatal(err)
		}
		t.Logf("outage over after %s: %d delta reads refused; lifting it (the chain ends at revision %d, %d deltas)",
			outage, throttle.Refused(), want.EndRevision(), len(want.Deltas))
		throttle.Lift()
	}, 0)

	if out.revision != want.EndRevision() {
		t.Errorf("the restore reached revision %d, the chain in the store ends at %d (%d deltas): %s",
			out.revision, want.EndRevision(), len(want.Deltas), out.restored)
	}
	etcd, err := b.cluster.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if c := druidv1alpha1.FindCondition(etcd.Status.Conditions, druidv1alpha1.ConditionTypeRestoreIncomplete); c != nil && c.Status == druidv1alpha1.ConditionTrue {
		t.Errorf("RestoreIncomplete is True after a complete restore: %s", c.Message)
	}
	report, recErr := rec.Stop(ctx)
	if recErr != nil {
		t.Errorf("recorder: %v", recErr)
	}
	if report.LinearizabilityError != "" {
		t.Errorf("history not linearizable (the writes lost within the RPO excluded): %s", report.LinearizabilityError)
	}
	t.Logf("store outage %s: restored to revision %d of %d; %d writes lost within the RPO, %d before the last delta; writer: %s",
		outage, out.revision, want.EndRevision(), out.lost, out.lostBeforeDelta, report.Summary())
}

// chain is the chain a restore of b's cluster would apply now.
func (b *backupEnv) chain(ctx context.Context) (snapshot.Chain, error) {
	snaps, err := b.snapshots(ctx)
	if err != nil {
		return snapshot.Chain{}, err
	}
	chain, _ := snapshot.Latest(snaps)
	return chain, nil
}

// restoreHeld says the restore has not finished: the Etcd still records the old cluster, no
// RestoreIncomplete was raised, and the member's Lease reports no restore done (a failed one,
// or none yet). why says what broke it.
func restoreHeld(ctx context.Context, b *backupEnv, oldID string) (bool, string) {
	etcd, err := b.cluster.Get(ctx)
	if err != nil {
		return true, "" // the apiserver's answer, not the restore's: asked again
	}
	if etcd.Status.ClusterID != oldID {
		return false, "a new cluster was recorded (" + etcd.Status.ClusterID + ") while the store refused delta reads"
	}
	if c := druidv1alpha1.FindCondition(etcd.Status.Conditions, druidv1alpha1.ConditionTypeRestoreIncomplete); c != nil && c.Status == druidv1alpha1.ConditionTrue {
		return false, "RestoreIncomplete raised: " + c.Message
	}
	lease, err := b.stack.Kube.CoordinationV1().Leases(b.cluster.Namespace).Get(ctx, b.cluster.PodName(0), metav1.GetOptions{})
	if err != nil {
		return true, ""
	}
	decision := lease.Annotations[memberlease.AnnotationStartDecision]
	if restoredRevision.MatchString(decision) && !strings.HasPrefix(decision, agent.StartRuleRestoreFailed) {
		return false, "the member reports a restore done: " + decision
	}
	return true, ""
}
