package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/etcd-conductor/etcd-conductor/etcdclient"
	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/resources"
	"github.com/etcd-conductor/etcd-conductor/test/framework"
	scenariopkg "github.com/etcd-conductor/etcd-conductor/test/scenario"
	"github.com/etcd-conductor/etcd-conductor/test/stack"
)

// TestRolloutDowngrade: 3.7.3 → 3.6.8 on three members under the writer. A 3.6 binary refuses
// the data of a 3.7 cluster ("version 3.7.0 is not supported"), so the operator first enables
// etcd's downgrade (the cluster version drops and every member rewrites its storage version),
// keeping the 3.7 image rendered until then, and only then replaces the members, followers
// first, the leader last after a handover: no quorum loss, exactly one leader change, every
// acknowledged write kept. Before that, a downgrade by two minors (3.7 → 3.5) is refused: a
// condition, lastErrors and an Event, the StatefulSet's image unchanged and no pod deleted.
func TestRolloutDowngrade(t *testing.T) {
	runDowngrade(t, 3, refusedTwoMinors, "LeadershipHandedOver")
}

// TestRolloutDowngradeFiveMembers is TestRolloutDowngrade on five members.
func TestRolloutDowngradeFiveMembers(t *testing.T) {
	// The handover shows in the figures (exactly one leader change); its Event is not asked for:
	// a five-member rollout records more Events on the Etcd than client-go's per-object burst.
	runDowngrade(t, 5, nil)
}

func runDowngrade(t *testing.T, replicas int32, before func(ctx context.Context, e *env), events ...string) {
	run(t, scenario{
		name: fmt.Sprintf("downgrade-%d", replicas), replicas: replicas,
		fromImage: framework.EtcdImage(toVersion), bumpImage: framework.EtcdImage(fromVersion),
		promise:    scenariopkg.Handover,
		beforeBump: before,
		wantEvents: append([]string{"DowngradeEnable", "DowngradeReplaceMembers"}, events...),
		verify:     downgraded,
	})
}

// refusedTwoMinors asks for 3.5 on the 3.7 cluster and checks that nothing moves.
func refusedTwoMinors(ctx context.Context, e *env) {
	t := e.t
	t.Helper()
	pods, err := e.cluster.Pods(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.cluster.SetImage(ctx, "quay.io/coreos/etcd:v3.5.21"); err != nil {
		t.Fatal(err)
	}
	e.waitFor(ctx, "the two-minor downgrade refused", func(ctx context.Context) (bool, error) {
		etcd, err := e.cluster.Get(ctx)
		if err != nil {
			return false, err
		}
		c := druidv1alpha1.FindCondition(etcd.Status.Conditions, druidv1alpha1.ConditionTypeVersionChange)
		refused := slices.ContainsFunc(etcd.Status.LastErrors, func(le druidv1alpha1.LastError) bool { return le.Code == resources.ErrVersionChange })
		return c != nil && c.Status == druidv1alpha1.ConditionTrue && c.Reason == "DowngradeRefuseMoreThanOneMinor" && refused, nil
	})
	events, err := e.cluster.EventsWithReason(ctx, "DowngradeRefuseMoreThanOneMinor")
	if err != nil || len(events) == 0 {
		t.Errorf("no DowngradeRefuseMoreThanOneMinor Event (%v)", err)
	}
	// Long enough for a wrongly rendered image to reach the StatefulSet and its first pod.
	time.Sleep(3 * time.Second)
	sts, err := e.cluster.StatefulSet(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := resources.RunningEtcdImage(sts); got != framework.EtcdImage(toVersion) {
		t.Errorf("the refused downgrade reached the StatefulSet: etcd image %s", got)
	}
	after, err := e.cluster.Pods(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, change := range stack.PodsChanged(pods, after) {
		t.Errorf("after a refused downgrade: %s", change)
	}
	t.Logf("two-minor downgrade refused: %v", events)
}

// downgraded checks what etcd says once the rollout is done: every member runs 3.6.8 on storage
// (and so a cluster version) of 3.6, etcd ended the downgrade by itself, and the Etcd's
// VersionChange condition is False again.
func downgraded(ctx context.Context, e *env) {
	t := e.t
	t.Helper()
	pool := etcdclient.NewPool(etcdclient.Options{})
	defer pool.Close()
	var last string
	e.waitFor(ctx, "every member at 3.6 with the downgrade ended", func(ctx context.Context) (bool, error) {
		cs, err := pool.Query(ctx, "e2e", e.cluster.PKI.ClientMaterial(), endpointTargets(e))
		if err != nil {
			return false, err
		}
		var states []string
		done := len(cs.Members) == e.cluster.Replicas
		for _, m := range cs.Members {
			states = append(states, fmt.Sprintf("%s %s storage %s downgrade %v", m.Name, m.Version, m.StorageVersion, m.DowngradeEnabled))
			done = done && m.Reachable && m.Version == fromVersion && m.StorageVersion == "3.6.0" && !m.DowngradeEnabled
		}
		last = strings.Join(states, ", ")
		return done, nil
	})
	t.Logf("members after the downgrade: %s", last)
	e.waitFor(ctx, "VersionChange False", func(ctx context.Context) (bool, error) {
		etcd, err := e.cluster.Get(ctx)
		if err != nil {
			return false, err
		}
		c := druidv1alpha1.FindCondition(etcd.Status.Conditions, druidv1alpha1.ConditionTypeVersionChange)
		return c != nil && c.Status == druidv1alpha1.ConditionFalse, nil
	})
}
