package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/etcd-conductor/etcd-conductor/etcdclient"
	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
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
	soakOnly(t, "TestRolloutDowngrade on five members; the batch on five members is TestRolloutFiveMembersOneDead's")
	// A five-member rollout records more Events on the Etcd than client-go's default per-object
	// burst (25) let through: the handover's is asked for all the same (operator.eventSpamLimits).
	runDowngrade(t, 5, nil, "LeadershipHandedOver")
}

func runDowngrade(t *testing.T, replicas int32, before func(ctx context.Context, e *env), events ...string) {
	run(t, downgradeScenario(replicas, before, events...))
}

// downgradeScenario is the downgrade 3.7.3 → 3.6.8 on replicas members with before run first,
// checked by downgraded, with the Events the downgrade records and events.
func downgradeScenario(replicas int32, before func(ctx context.Context, e *env), events ...string) scenario {
	return scenario{
		name: fmt.Sprintf("downgrade-%d", replicas), replicas: replicas,
		fromImage: framework.EtcdImage(toVersion), bumpImage: framework.EtcdImage(fromVersion),
		promise:    scenariopkg.Handover,
		beforeBump: before,
		wantEvents: append([]string{"DowngradeEnable", "DowngradeReplaceMembers"}, events...),
		verify:     downgraded,
	}
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
// (and so a cluster version) of 3.6, etcd ended the downgrade by itself, the Etcd's
// VersionChange condition is False again and the StatefulSet no longer records the downgrade.
func downgraded(ctx context.Context, e *env) {
	t := e.t
	t.Helper()
	last := waitMembersAt(ctx, e, "every member at 3.6 with the downgrade ended", fromVersion, "3.6.0")
	t.Logf("members after the downgrade: %s", last)
	e.waitFor(ctx, "VersionChange False", func(ctx context.Context) (bool, error) {
		etcd, err := e.cluster.Get(ctx)
		if err != nil {
			return false, err
		}
		c := druidv1alpha1.FindCondition(etcd.Status.Conditions, druidv1alpha1.ConditionTypeVersionChange)
		return c != nil && c.Status == druidv1alpha1.ConditionFalse, nil
	})
	// The source the downgrade recorded (what a failed member would be rolled forward to) goes
	// with it: a later failure on 3.6 is no downgrade's.
	e.waitFor(ctx, "the downgrade record removed from the StatefulSet", func(ctx context.Context) (bool, error) {
		sts, err := e.cluster.StatefulSet(ctx)
		if err != nil {
			return false, err
		}
		source, failed := resources.DowngradeRecord(sts)
		return source == "" && failed == "", nil
	})
}

// missingVersion is a 3.6 tag no registry holds: the node cannot pull it (ErrImagePull, then
// ImagePullBackOff), the most common way a member replaced onto a downgrade's target fails.
const missingVersion = "3.6.99"

// TestRolloutDowngradeFailedTarget: 3.7.3 → 3.6.99 on three members under the writer, a target
// whose image cannot be pulled. The operator enables etcd's downgrade and renders the target as
// for any downgrade; the first member replaced onto it does not start. The operator then cancels
// the downgrade by itself, renders 3.7.3 again and the rollout replaces the failed member back:
// every member on 3.7.3, the cluster version 3.7 again, no downgrade enabled, no quorum loss, no
// leader change (the leader is never replaced), every acknowledged write kept. The failure is
// recorded (VersionChange False DowngradeRefuseFailedTarget, ERR_VERSION_CHANGE, Warning Events)
// and the same target is not tried again while the spec still names it.
func TestRolloutDowngradeFailedTarget(t *testing.T) {
	var failed string
	run(t, scenario{
		name: "downgrade-failed-target", replicas: 3,
		fromImage: framework.EtcdImage(toVersion), bumpImage: framework.EtcdImage(missingVersion), finalImage: framework.EtcdImage(toVersion),
		promise: scenariopkg.Promise{NoQuorumLoss: true, LeaderChanges: 0},
		afterBump: func(ctx context.Context, e *env) {
			failed = waitRolledForward(ctx, e)
		},
		wantEvents: []string{"DowngradeEnable", "DowngradeReplaceMembers", "DowngradeRollForwardMemberFailed", "DowngradeRefuseFailedTarget"},
		verify: func(ctx context.Context, e *env) {
			e.t.Logf("the member that failed on %s: %s", missingVersion, failed)
			rolledForward(ctx, e)
		},
	})
}

// waitRolledForward waits, during the rollout, until a member pod on the missing image failed to
// start as a kubelet reports an image it cannot pull (ErrImagePull, ImagePullBackOff) and the
// operator rendered the source image again with the target recorded as failed; it returns the
// failed pod and what its etcd container showed.
func waitRolledForward(ctx context.Context, e *env) (failed string) {
	target, source := framework.EtcdImage(missingVersion), framework.EtcdImage(toVersion)
	rendered := false
	e.waitFor(ctx, "a member failed on the target, then the source rendered again", func(ctx context.Context) (bool, error) {
		pods, err := e.cluster.Pods(ctx)
		if err != nil {
			return false, err
		}
		for _, p := range pods {
			onTarget := slices.ContainsFunc(p.Spec.Containers, func(c corev1.Container) bool {
				return c.Name == resources.EtcdContainerName && c.Image == target
			})
			for _, s := range p.Status.ContainerStatuses {
				pullFailed := s.State.Waiting != nil && (s.State.Waiting.Reason == "ErrImagePull" || s.State.Waiting.Reason == "ImagePullBackOff")
				if onTarget && s.Name == resources.EtcdContainerName && pullFailed && failed == "" {
					failed = fmt.Sprintf("%s %s: %s", p.Name, s.State.Waiting.Reason, s.State.Waiting.Message)
				}
			}
		}
		sts, err := e.cluster.StatefulSet(ctx)
		if err != nil {
			return false, err
		}
		image := resources.RunningEtcdImage(sts)
		rendered = rendered || image == target
		_, failedTarget := resources.DowngradeRecord(sts)
		return rendered && failed != "" && image == source && failedTarget == target, nil
	})
	return failed
}

// rolledForward checks what the roll forward left: every member on 3.7.3 with storage (and so
// cluster) version 3.7 and no downgrade enabled, /version saying cluster 3.7 on every member, the
// failure recorded on the Etcd, and then for a while no pod replaced and nothing tried again.
func rolledForward(ctx context.Context, e *env) {
	t := e.t
	t.Helper()
	last := waitMembersAt(ctx, e, "every member back at 3.7 with no downgrade enabled", toVersion, "3.7.0")
	t.Logf("members after the roll forward: %s", last)
	e.waitFor(ctx, "cluster version 3.7 on every member", func(ctx context.Context) (bool, error) {
		versions, err := clusterVersions(ctx, e)
		last = fmt.Sprint(versions)
		if err != nil || len(versions) != e.cluster.Replicas {
			return false, err
		}
		for _, v := range versions {
			if v != "3.7.0" {
				return false, nil
			}
		}
		return true, nil
	})
	t.Logf("cluster version by member: %s", last)
	var recorded string
	e.waitFor(ctx, "the failure recorded on the Etcd", func(ctx context.Context) (bool, error) {
		etcd, err := e.cluster.Get(ctx)
		if err != nil {
			return false, err
		}
		c := druidv1alpha1.FindCondition(etcd.Status.Conditions, druidv1alpha1.ConditionTypeVersionChange)
		i := slices.IndexFunc(etcd.Status.LastErrors, func(le druidv1alpha1.LastError) bool { return le.Code == resources.ErrVersionChange })
		if c == nil || c.Status != druidv1alpha1.ConditionFalse || c.Reason != "DowngradeRefuseFailedTarget" || i < 0 {
			return false, nil
		}
		recorded = fmt.Sprintf("VersionChange %s %s: %s; lastError %s: %s", c.Status, c.Reason, c.Message, etcd.Status.LastErrors[i].Code, etcd.Status.LastErrors[i].Description)
		return true, nil
	})
	t.Logf("recorded: %s", recorded)

	// Not tried again: the spec still names the target, and for a while no pod is replaced, the
	// template keeps 3.7.3 and no downgrade is enabled again.
	before, err := e.cluster.Pods(ctx)
	if err != nil {
		t.Fatal(err)
	}
	enables, err := e.cluster.EventsWithReason(ctx, "DowngradeEnable")
	if err != nil {
		t.Fatal(err)
	}
	pool := etcdclient.NewPool(etcdclient.Options{})
	defer pool.Close()
	const quiet = 15 * time.Second
	deadline := time.Now().Add(quiet)
	for time.Now().Before(deadline) {
		cs, err := pool.Query(ctx, "e2e", e.cluster.PKI.ClientMaterial(), endpointTargets(e))
		if err == nil {
			for _, m := range cs.Members {
				if m.DowngradeEnabled {
					t.Errorf("downgrade enabled again on %s while the failed target is refused", m.Name)
				}
			}
		}
		time.Sleep(time.Second)
	}
	after, err := e.cluster.Pods(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, change := range stack.PodsChanged(before, after) {
		t.Errorf("within %s after the roll forward: %s", quiet, change)
	}
	sts, err := e.cluster.StatefulSet(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := resources.RunningEtcdImage(sts); got != framework.EtcdImage(toVersion) {
		t.Errorf("the failed target rendered again: etcd image %s", got)
	}
	again, err := e.cluster.EventsWithReason(ctx, "DowngradeEnable")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(enables, again) {
		t.Errorf("the downgrade enabled again: %v, was %v", again, enables)
	}
	t.Logf("no pod replaced and nothing enabled within %s after the roll forward", quiet)
}

// clusterVersions asks each member's /version (etcd's HTTP endpoint, over the client mTLS) for the
// cluster version it holds.
func clusterVersions(ctx context.Context, e *env) (map[string]string, error) {
	out := map[string]string{}
	for _, ep := range e.cluster.Endpoints()() {
		tlsConfig, err := e.cluster.PKI.ClientMaterial().ConfigOrPlain(ep.ServerName)
		if err != nil {
			return nil, err
		}
		scheme := "http"
		if tlsConfig != nil {
			scheme = "https"
		}
		hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsConfig}}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, scheme+"://"+ep.Address+"/version", nil)
		if err != nil {
			return nil, err
		}
		resp, err := hc.Do(req)
		if err != nil {
			return nil, fmt.Errorf("asking %s for its version: %w", ep.Name, err)
		}
		var v struct {
			Cluster string `json:"etcdcluster"`
		}
		err = json.NewDecoder(resp.Body).Decode(&v)
		resp.Body.Close()
		hc.CloseIdleConnections()
		if err != nil {
			return nil, fmt.Errorf("reading the version of %s: %w", ep.Name, err)
		}
		out[ep.Name] = v.Cluster
	}
	return out, nil
}

// waitMembersAt waits until every member answers with version on storage version storage and no
// downgrade enabled, and returns what they said last.
func waitMembersAt(ctx context.Context, e *env, what, version, storage string) string {
	e.t.Helper()
	pool := etcdclient.NewPool(etcdclient.Options{})
	defer pool.Close()
	var last string
	e.waitFor(ctx, what, func(ctx context.Context) (bool, error) {
		cs, err := pool.Query(ctx, "e2e", e.cluster.PKI.ClientMaterial(), endpointTargets(e))
		if err != nil {
			return false, err
		}
		var states []string
		done := len(cs.Members) == e.cluster.Replicas
		for _, m := range cs.Members {
			states = append(states, fmt.Sprintf("%s %s storage %s downgrade %v", m.Name, m.Version, m.StorageVersion, m.DowngradeEnabled))
			done = done && m.Reachable && m.Version == version && m.StorageVersion == storage && !m.DowngradeEnabled
		}
		last = strings.Join(states, ", ")
		return done, nil
	})
	return last
}
