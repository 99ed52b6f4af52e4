package e2e

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
	"github.com/etcd-conductor/etcd-conductor/test/framework"
)

// TestMemberNamePrefixAndAdditionalPeerURLs: an Etcd with spec.memberNamePrefix and an
// additional peer URL for one member (its fully qualified name under the peer Service, which
// its certificate covers) forms and serves writes. etcd's member list names the members
// <prefix>-<pod> and lists the additional URL after the member's own, the member Leases carry
// those names and are renewed, and status.members lists them so. Then, under the writer and its
// auditor, the additional URL moves to another member: the template change rolls every pod
// (OnDelete, with the prefix), and the membership controller re-records both members' peer URLs
// as their pods now advertise them (peer-url/follow-pod). Last, a scale-out to 5 adds learners
// under their peer URLs (one with an additional URL) that join under their prefixed names; no
// acknowledged write is lost and the history is linearizable throughout.
func TestMemberNamePrefixAndAdditionalPeerURLs(t *testing.T) {
	namespace, _ := inParallel(t, "e2e-prefix-", operatorDefaults)
	s := sharedStack(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	e := &env{t: t, stack: s}
	const prefix = "p"
	extraURL := func(i int) string {
		return fmt.Sprintf("https://%s-%d.%s-peer.%s.svc.cluster.local:2380", etcdName, i, etcdName, namespace)
	}
	member := func(i int) string { return fmt.Sprintf("%s-%s-%d", prefix, etcdName, i) }
	started := time.Now()
	cluster := createClusterWith(ctx, e, namespace, 3, func(_ context.Context, _ string, etcd *druidv1alpha1.Etcd) error {
		etcd.Spec.MemberNamePrefix = ptr.To(prefix)
		// Member 4 comes with the scale-out below; its entry waits for it.
		etcd.Spec.Etcd.AdditionalAdvertisePeerURLs = []druidv1alpha1.MemberPeerURLs{
			{MemberName: member(1), URLs: []string{extraURL(1)}}, {MemberName: member(4), URLs: []string{extraURL(4)}}}
		return nil
	})
	t.Logf("ready after %s", time.Since(started).Round(100*time.Millisecond))
	// The writer and its auditor run from here to the end: through the rollout and the
	// scale-out.
	rec := startRecorder(ctx, t, cluster, 3)

	checkMemberPeerURLs(ctx, t, e, map[int][]string{1: {extraURL(1)}}, member)
	checkMemberLeasesRenewed(ctx, t, e, member)
	got, err := cluster.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, m := range got.Status.Members {
		listed = append(listed, m.Name)
	}
	if want := []string{member(0), member(1), member(2)}; !slices.Equal(listed, want) {
		t.Errorf("status.members %v, want %v", listed, want)
	}

	// The additional URL moves from member 1 to member 2: a rollout with the prefix, and both
	// members' recorded peer URLs follow their pods.
	before, err := cluster.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(got.DeepCopy())
	got.Spec.Etcd.AdditionalAdvertisePeerURLs = []druidv1alpha1.MemberPeerURLs{
		{MemberName: member(2), URLs: []string{extraURL(2)}}, {MemberName: member(4), URLs: []string{extraURL(4)}}}
	changed := time.Now()
	if err := s.Client.Patch(ctx, got, patch); err != nil {
		t.Fatal(err)
	}
	e.waitFor(ctx, "a new update revision", func(ctx context.Context) (bool, error) {
		st, err := cluster.State(ctx)
		return err == nil && st.UpdateRevision != "" && st.UpdateRevision != before.UpdateRevision, err
	})
	if err := cluster.WaitConverged(ctx, framework.EtcdImage(fromVersion)); err != nil {
		t.Fatalf("rollout did not complete: %v", err)
	}
	checkMemberPeerURLs(ctx, t, e, map[int][]string{2: {extraURL(2)}}, member)
	rollout := time.Since(changed)
	checkMemberLeasesRenewed(ctx, t, e, member)

	// Scaled out to 5, the new member 4 with its additional URL (no template change, no
	// rollout): each learner is added under its peer URLs, joins under its prefixed name and is
	// promoted.
	if got, err = cluster.Get(ctx); err != nil {
		t.Fatal(err)
	}
	patch = client.MergeFrom(got.DeepCopy())
	got.Spec.Replicas = 5
	scaled := time.Now()
	if err := s.Client.Patch(ctx, got, patch); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 2*time.Minute, "five members settled", func(ctx context.Context) (bool, string) {
		return membershipSettled(ctx, e, 5)
	})
	scaleOut := time.Since(scaled)
	checkMemberPeerURLs(ctx, t, e, map[int][]string{2: {extraURL(2)}, 4: {extraURL(4)}}, member)
	checkMemberLeasesRenewed(ctx, t, e, member)
	report, recErr := rec.Stop(ctx)
	t.Logf("figures member-names: rollout=%s scaleOut=%s %s", rollout.Round(100*time.Millisecond), scaleOut.Round(100*time.Millisecond), report.Summary())
	checkWrites(t, report, recErr)
	if report.LinearizabilityError != "" {
		t.Errorf("history not linearizable: %s", report.LinearizabilityError)
	}
}

// checkMemberPeerURLs waits until etcd's member list names exactly the members member(i), each
// with its name under the peer Service and the additional URLs extra[i], no more.
func checkMemberPeerURLs(ctx context.Context, t *testing.T, e *env, extra map[int][]string, member func(int) string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	e.waitFor(ctx, "member names and peer URLs", func(ctx context.Context) (bool, error) {
		members, err := memberList(ctx, e)
		if err != nil {
			return false, err
		}
		got := map[string][]string{}
		for _, m := range members {
			got[m.Name] = slices.Sorted(slices.Values(m.PeerURLs))
		}
		want := map[string][]string{}
		for i := range e.cluster.Replicas {
			pod := e.cluster.PodName(i)
			urls := append([]string{fmt.Sprintf("https://%s:2380", resources.MemberDNSName(e.cluster.Name, e.cluster.Namespace, pod))}, extra[i]...)
			want[member(i)] = slices.Sorted(slices.Values(urls))
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			return false, fmt.Errorf("member list %v, want %v", got, want)
		}
		return true, nil
	})
}

// checkMemberLeasesRenewed waits until the Etcd's member Leases are exactly member(i), each held
// by a member and renewed within its duration.
func checkMemberLeasesRenewed(ctx context.Context, t *testing.T, e *env, member func(int) string) {
	t.Helper()
	sel := resources.SelectorLabels(&druidv1alpha1.Etcd{})
	sel[resources.LabelInstance] = e.cluster.Name
	var want []string
	for i := range e.cluster.Replicas {
		want = append(want, member(i))
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	e.waitFor(ctx, fmt.Sprintf("member Leases %v renewed", want), func(ctx context.Context) (bool, error) {
		leases := &coordinationv1.LeaseList{}
		if err := e.stack.Client.List(ctx, leases, client.InNamespace(e.cluster.Namespace), client.MatchingLabels(sel)); err != nil {
			return false, err
		}
		var got, stale []string
		for _, l := range leases.Items {
			got = append(got, l.Name)
			if l.Spec.HolderIdentity == nil || l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil ||
				time.Since(l.Spec.RenewTime.Time) > time.Duration(*l.Spec.LeaseDurationSeconds)*time.Second {
				stale = append(stale, l.Name)
			}
		}
		sort.Strings(got)
		if !slices.Equal(got, want) || len(stale) > 0 {
			return false, fmt.Errorf("member Leases %v (not renewed: %s)", got, strings.Join(stale, ","))
		}
		return true, nil
	})
}
