package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/contract/memberlease"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
	"github.com/etcd-conductor/etcd-conductor/test/framework"
)

// TestMemberNamePrefixNamesMembersAndLeases: an Etcd with spec.memberNamePrefix is acted on, not
// refused: its member Leases are <prefix>-<pod>, the member-agent Role may patch exactly those,
// the members start under those names with their additional peer URLs (StatefulSet, ConfigMap),
// status.members lists them by those names with the roles their Leases report, and a Lease is
// kept while its member is a recorded voter, then goes. The prefix cannot be changed. (No members
// run here: the Leases are renewed and the voters recorded as the members and the membership
// controller would.)
func TestMemberNamePrefixNamesMembersAndLeases(t *testing.T) {
	t.Parallel() // it mostly waits on its operator (sharedControlPlane)
	env := sharedControlPlane(t)
	ns := testNamespace("member-names")
	const name, prefix = "etcd-main", "p"
	ctx := setup(t, env, ns, name)
	framework.StartOperator(t, env.RESTConfig(), framework.OperatorOptions{FeatureGates: gate(true), WatchNamespaces: []string{ns}})
	c := env.Client()

	etcd := framework.NewEtcd(ns, name, 3, framework.EtcdImage("3.6.8"))
	etcd.Spec.MemberNamePrefix = ptr.To(prefix)
	etcd.Spec.Etcd.AdditionalAdvertisePeerURLs = []druidv1alpha1.MemberPeerURLs{{MemberName: "p-etcd-main-1", URLs: []string{"https://10.9.0.1:2380"}}}
	if err := c.Create(ctx, etcd, client.FieldValidation("Strict")); err != nil {
		t.Fatal(err)
	}
	members := []string{"p-etcd-main-0", "p-etcd-main-1", "p-etcd-main-2"}
	leaseExists := func(lease string) bool {
		err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: lease}, &coordinationv1.Lease{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		return err == nil
	}

	framework.Eventually(t, timeout, "Leases, Role, StatefulSet and ConfigMap under the member names", func(ctx context.Context) (bool, string) {
		for _, m := range members {
			if !leaseExists(m) {
				return false, "no Lease " + m
			}
		}
		role := &rbacv1.Role{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: resources.MemberAgentRoleName(etcd)}, role); err != nil {
			return false, err.Error()
		}
		if got := role.Rules[0].ResourceNames; !slices.Equal(got, members) {
			return false, fmt.Sprintf("member-agent Role patches %v", got)
		}
		sts, err := getStatefulSet(ctx, c, ns, name)
		if err != nil {
			return false, err.Error()
		}
		init := strings.Join(sts.Spec.Template.Spec.InitContainers[0].Args, " ")
		for _, want := range []string{"--name=p-$(POD_NAME)", "--lease=p-$(POD_NAME)", "--additional-peer-urls=p-etcd-main-1=https://10.9.0.1:2380"} {
			if !strings.Contains(init, want) {
				return false, fmt.Sprintf("member-init args lack %s: %s", want, init)
			}
		}
		if agent := strings.Join(sts.Spec.Template.Spec.Containers[1].Args, " "); !strings.Contains(agent, "--lease=p-$(POD_NAME)") {
			return false, "member-agent args " + agent
		}
		cm := &corev1.ConfigMap{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: resources.ConfigMapName(etcd)}, cm); err != nil {
			return false, err.Error()
		}
		cluster := cm.Data[resources.EnvInitialCluster]
		for _, want := range []string{"p-etcd-main-0=https://etcd-main-0.etcd-main-peer." + ns + ".svc:2380", "p-etcd-main-1=https://10.9.0.1:2380"} {
			if !strings.Contains(cluster, want) {
				return false, "initial cluster " + cluster
			}
		}
		return true, ""
	})
	if leaseExists("etcd-main-0") {
		t.Fatal("a Lease named after the pod was created next to the member's")
	}
	got := &druidv1alpha1.Etcd{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(etcd), got); err != nil {
		t.Fatal(err)
	}
	for _, e := range got.Status.LastErrors {
		if e.Code == resources.ErrUnsupportedField || e.Code == resources.ErrInvalidAdditionalPeerURLs {
			t.Fatalf("refused: %+v", e)
		}
	}

	// What the member-agents write: the status lists members by their etcd names and the roles
	// their Leases report.
	now := metav1.NewMicroTime(time.Now())
	for i, m := range members {
		patch, err := json.Marshal(map[string]any{"spec": map[string]any{
			"holderIdentity": memberlease.HolderIdentity(uint64(0xa0+i), 0xc1, i == 0), "renewTime": now,
		}})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Patch(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: m}}, client.RawPatch(types.MergePatchType, patch)); err != nil {
			t.Fatal(err)
		}
	}
	framework.Eventually(t, timeout, "status.members named <prefix>-<pod> with their roles", func(ctx context.Context) (bool, string) {
		got := &druidv1alpha1.Etcd{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(etcd), got); err != nil {
			return false, err.Error()
		}
		var seen []string
		for _, m := range got.Status.Members {
			role := "-"
			if m.Role != nil {
				role = string(*m.Role)
			}
			seen = append(seen, m.Name+"/"+role)
		}
		want := []string{"p-etcd-main-0/Leader", "p-etcd-main-1/Member", "p-etcd-main-2/Member"}
		return slices.Equal(seen, want), fmt.Sprintf("members %v, want %v", seen, want)
	})

	// The prefix is immutable (CRD rule), as in etcd-druid.
	if err := c.Get(ctx, client.ObjectKeyFromObject(etcd), got); err != nil {
		t.Fatal(err)
	}
	got.Spec.MemberNamePrefix = ptr.To("q")
	if err := c.Update(ctx, got); err == nil || !strings.Contains(err.Error(), "immutable") {
		t.Fatalf("changing the prefix: err = %v, want the immutability rule", err)
	}

	// Scaled in to 1: the Leases of p-etcd-main-1 and -2 stay while they are recorded voters (by
	// their etcd names), then go.
	setVoters := func(n int) { recordVoters(ctx, t, c, etcd, n, func(i int) string { return members[i] }) }
	setVoters(3)
	if err := c.Get(ctx, client.ObjectKeyFromObject(etcd), got); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(got.DeepCopy())
	got.Spec.Replicas = 1
	got.Spec.Etcd.AdditionalAdvertisePeerURLs = nil
	if err := c.Patch(ctx, got, patch); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		if !leaseExists("p-etcd-main-1") || !leaseExists("p-etcd-main-2") {
			t.Fatal("the Lease of a recorded voter was deleted")
		}
	}
	setVoters(1)
	framework.Eventually(t, timeout, "the Leases of the members that left deleted", func(context.Context) (bool, string) {
		return !leaseExists("p-etcd-main-1") && !leaseExists("p-etcd-main-2") && leaseExists("p-etcd-main-0"), "not yet"
	})
}

// TestAdditionalPeerURLsOfNoMemberAreRefused: an entry that names no member of this Etcd (here:
// the pod's name while a prefix is set) is reported in status.lastErrors and nothing is built
// from the spec.
func TestAdditionalPeerURLsOfNoMemberAreRefused(t *testing.T) {
	env := sharedControlPlane(t)
	ns, name := testNamespace("member-names-bad"), "etcd-main"
	ctx := setup(t, env, ns, name)
	framework.StartOperator(t, env.RESTConfig(), framework.OperatorOptions{FeatureGates: gate(true), WatchNamespaces: []string{ns}})
	c := env.Client()
	etcd := framework.NewEtcd(ns, name, 3, framework.EtcdImage("3.6.8"))
	etcd.Spec.MemberNamePrefix = ptr.To("p")
	etcd.Spec.Etcd.AdditionalAdvertisePeerURLs = []druidv1alpha1.MemberPeerURLs{{MemberName: "etcd-main-1", URLs: []string{"https://10.9.0.1:2380"}}}
	if err := c.Create(ctx, etcd); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, timeout, "lastErrors naming the entry", func(ctx context.Context) (bool, string) {
		got := &druidv1alpha1.Etcd{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(etcd), got); err != nil {
			return false, err.Error()
		}
		for _, e := range got.Status.LastErrors {
			if e.Code == resources.ErrInvalidAdditionalPeerURLs && strings.Contains(e.Description, `"etcd-main-1"`) {
				return true, ""
			}
		}
		return false, fmt.Sprintf("lastErrors %+v", got.Status.LastErrors)
	})
	if _, err := getStatefulSet(ctx, c, ns, name); !apierrors.IsNotFound(err) {
		t.Fatalf("StatefulSet of a refused spec: err = %v, want NotFound", err)
	}
}
