package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/contract/memberlease"
	"github.com/etcd-conductor/etcd-conductor/internal/contract/snapshot"
	recoveryplan "github.com/etcd-conductor/etcd-conductor/internal/decide/recovery"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/ruleid"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
	"github.com/etcd-conductor/etcd-conductor/internal/store/backupstore"
	"github.com/etcd-conductor/etcd-conductor/test/brfixture"
	"github.com/etcd-conductor/etcd-conductor/test/framework"
	"github.com/etcd-conductor/etcd-conductor/test/s3server"
	conductortls "github.com/etcd-conductor/etcd-conductor/tls"
)

// TestBootstrapFromDruidBackup: an etcd-druid user switches through the backup. etcd-druid's S3
// example (test/testdata/druid/example-s3.yaml: 3 members, plain HTTP, gzip) is created with its
// store prefix holding a backup in etcd-backup-restore's format (test/brfixture: a full snapshot
// and three gzip deltas, as a bucket copied from a druid cluster holds them). The Etcd must start
// from that backup, not empty: every key of the backup (expected.json, revision 59) is served,
// and nothing else, by each of the three members, which then take audited, linearizable writes;
// the members' backup loop goes on with a full snapshot of its own next to the druid objects,
// which stay. Side by side, the same Etcd over an empty prefix bootstraps empty as before, with
// no recovery at all.
func TestBootstrapFromDruidBackup(t *testing.T) {
	s := sharedStack(t)
	framework.StartOperator(t, s.Cluster.RESTConfig(), operatorDefaults)
	raw, err := os.ReadFile(filepath.Join("..", "testdata", "druid", "example-s3.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	manifest := &druidv1alpha1.Etcd{}
	if err := yaml.UnmarshalStrict(raw, manifest); err != nil {
		t.Fatal(err)
	}
	want, err := brfixture.Expected()
	if err != nil {
		t.Fatal(err)
	}
	srv := s3server.StartT(t, s.Network.GatewayIP(), *manifest.Spec.Backup.Store.Container)
	for _, tt := range []struct {
		name string
		// fixture is the etcd-backup-restore chain the prefix holds before the Etcd exists ("":
		// none).
		fixture string
	}{
		{name: "druid-bucket", fixture: brfixture.Gzip},
		{name: "empty-bucket"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
			defer cancel()
			e := &env{t: t, stack: s}
			prefix := manifest.Spec.Backup.Store.Prefix + "-" + tt.name
			store, err := backupstore.New(backupstore.Config{Provider: "S3", Container: *manifest.Spec.Backup.Store.Container, Prefix: prefix, Secret: srv.SecretData()})
			if err != nil {
				t.Fatal(err)
			}
			var druidKeys []string
			if tt.fixture != "" {
				if druidKeys, err = brfixture.Put(ctx, store, tt.fixture); err != nil {
					t.Fatal(err)
				}
			}
			var created time.Time
			cluster := createClusterNamed(ctx, e, "e2e-bootstrap-", manifest.Name, resources.DefaultEtcdImage, manifest.Spec.Replicas, func(ctx context.Context, namespace string, etcd *druidv1alpha1.Etcd) error {
				secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: manifest.Spec.Backup.Store.SecretRef.Name}, Data: srv.SecretData()}
				if err := s.Client.Create(ctx, secret); err != nil {
					return err
				}
				etcd.Name, etcd.Labels, etcd.Spec = manifest.Name, manifest.Labels, *manifest.Spec.DeepCopy()
				etcd.Spec.Backup.Store.Prefix = prefix
				created = time.Now()
				return nil
			})
			ready := time.Since(created)
			material := conductortls.PlaintextMaterial()

			// Every member is a started voter and serves the keyspace: the backup's, exactly, or
			// none at all.
			eps := cluster.Endpoints()()
			if len(eps) != int(manifest.Spec.Replicas) {
				t.Fatalf("%d endpoints, want %d", len(eps), manifest.Spec.Replicas)
			}
			members, err := pb.NewClusterClient(dialMember(t, eps[0], material.ConfigOrPlain)).MemberList(ctx, &pb.MemberListRequest{Linearizable: true})
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range members.Members {
				if m.IsLearner || len(m.ClientURLs) == 0 {
					t.Errorf("member %s (%x) is a learner or never started", m.Name, m.ID)
				}
			}
			wantKeys := map[string]string{}
			if tt.fixture != "" {
				wantKeys = want.Keys
			}
			for _, ep := range eps {
				got, rev := readAll(ctx, t, pb.NewKVClient(dialMember(t, ep, material.ConfigOrPlain)))
				if tt.fixture != "" && rev < want.Revision {
					t.Errorf("member %s serves revision %d, want at least the backup's %d", ep.Name, rev, want.Revision)
				}
				sameKeyspace(t, ep.Name, got, wantKeys)
			}
			checkBootstrapReports(ctx, e, tt.fixture != "")

			// The cluster takes writes, audited and linearizable.
			report := writeAWhile(ctx, t, cluster, material)

			// The backup goes on: a full snapshot of the new cluster, from the backup's revision
			// on, beside the druid objects, none of which is deleted.
			var ours string
			minRevision := int64(0)
			if tt.fixture != "" {
				minRevision = want.Revision
			}
			e.waitFor(ctx, "a full snapshot of the new cluster", func(ctx context.Context) (bool, error) {
				objs, err := store.List(ctx, snapshot.Dir)
				if err != nil {
					return false, err
				}
				have := map[string]bool{}
				for _, o := range objs {
					have[o.Key] = true
					if s, err := snapshot.Parse(o.Key); err == nil && s.Kind == snapshot.KindFull && s.CreatedOn.After(created.Add(-time.Second)) && s.EndRevision >= minRevision {
						ours = s.Name()
					}
				}
				for _, k := range druidKeys {
					if !have[k] {
						return false, fmt.Errorf("the druid object %s is gone from the store", k)
					}
				}
				return ours != "", fmt.Errorf("%d objects, no full snapshot of the new cluster yet", len(objs))
			})
			fmt.Printf("e2e bootstrap %-13s ready=%-6s (creation to 3 Ready members serving the keyspace) keys=%d firstFullSnapshot=%s %s\n",
				tt.name, ready.Round(100*time.Millisecond), len(wantKeys), ours, report.Summary())
		})
	}
}

// readAll reads every key through one member, linearizably, and the revision it reads at.
func readAll(ctx context.Context, t *testing.T, conn pb.KVClient) (map[string]string, int64) {
	t.Helper()
	resp, err := conn.Range(ctx, &pb.RangeRequest{Key: []byte{0}, RangeEnd: []byte{0}})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, kv := range resp.Kvs {
		out[string(kv.Key)] = string(kv.Value)
	}
	return out, resp.Header.Revision
}

// sameKeyspace fails on every key missing, different or extra.
func sameKeyspace(t *testing.T, member string, got, want map[string]string) {
	t.Helper()
	var diffs []string
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			diffs = append(diffs, fmt.Sprintf("%q = %q (present %v), want %q", k, g, ok, v))
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			diffs = append(diffs, fmt.Sprintf("%q is not in the backup", k))
		}
	}
	if len(diffs) > 0 {
		t.Errorf("member %s serves %d keys, want %d: %s", member, len(got), len(want), strings.Join(diffs, "; "))
	}
}

// checkBootstrapReports checks how the members started, from their Leases and the Etcd's status:
// from the backup, member 0 restored it (revision 59) on the operator's order and the recovery
// finished; from an empty store, every member bootstrapped and recovery never acted.
func checkBootstrapReports(ctx context.Context, e *env, fromBackup bool) {
	t, cluster := e.t, e.cluster
	t.Helper()
	if fromBackup {
		e.waitFor(ctx, "the recovery finished", func(ctx context.Context) (bool, error) {
			etcd, err := cluster.Get(ctx)
			if err != nil {
				return false, err
			}
			c := druidv1alpha1.FindCondition(etcd.Status.Conditions, druidv1alpha1.ConditionTypeRecoveryInProgress)
			return etcd.Status.Recovery == nil && c != nil && c.Status == druidv1alpha1.ConditionFalse, fmt.Errorf("RecoveryInProgress %+v", c)
		})
	}
	etcd, err := cluster.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	recovery := druidv1alpha1.FindCondition(etcd.Status.Conditions, druidv1alpha1.ConditionTypeRecoveryInProgress)
	leases := e.stack.Kube.CoordinationV1().Leases(cluster.Namespace)
	var decisions []string
	for i := range cluster.Replicas {
		l, err := leases.Get(ctx, cluster.PodName(i), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		decisions = append(decisions, l.Annotations[memberlease.AnnotationStartDecision])
	}
	t.Logf("start decisions: %s", strings.Join(decisions, " | "))
	if !fromBackup {
		// The recovery controller may have looked (quorum is "lost" while the members start),
		// but it never waited for, nor ordered, a restore.
		if etcd.Status.Recovery != nil || (recovery != nil && recovery.Status == druidv1alpha1.ConditionTrue) {
			t.Errorf("recovery acted on a new Etcd with an empty store: %+v %+v", recovery, etcd.Status.Recovery)
		}
		for _, rule := range []ruleid.ID{recoveryplan.RuleBootstrapWait, recoveryplan.RuleBootstrapFromBackup, recoveryplan.RuleStart} {
			if evs, err := cluster.EventsWithReason(ctx, rule.CamelCase()); err != nil || len(evs) > 0 {
				t.Errorf("Events %s on a new Etcd with an empty store: %v %v", rule.CamelCase(), evs, err)
			}
		}
		// A member that starts after two others formed the cluster joins it (join/listed):
		// either way, no member waited for a backup.
		for i, d := range decisions {
			if !strings.HasPrefix(d, "bootstrap/new: ") && !strings.HasPrefix(d, "join/listed: ") {
				t.Errorf("member %d: %q, want bootstrap/new or join/listed", i, d)
			}
		}
		return
	}
	// What the operator did, in order (logged, not asserted: the recorder's spam filter may drop
	// Events).
	for _, prefix := range []string{"Recovery", "ClusterBootstrapped"} {
		evs, _ := cluster.EventsWithReason(ctx, prefix)
		for _, ev := range evs {
			t.Logf("event %s", ev)
		}
	}
	if !strings.HasPrefix(decisions[0], "restore/from-backup: ") || !strings.Contains(decisions[0], "revision 59 of 59") {
		t.Errorf("member 0: %q, want restore/from-backup to revision 59 of 59", decisions[0])
	}
	for i, d := range decisions[1:] {
		if !strings.HasPrefix(d, "join/listed: ") {
			t.Errorf("member %d: %q, want join/listed (a learner of the restored cluster)", i+1, d)
		}
	}
	if recovery == nil || recovery.Status != druidv1alpha1.ConditionFalse || etcd.Status.Recovery != nil || etcd.Status.ClusterID == "" {
		t.Errorf("after the bootstrap from the backup: RecoveryInProgress %+v, recovery %+v, clusterID %q; want it finished and the cluster recorded",
			recovery, etcd.Status.Recovery, etcd.Status.ClusterID)
	}
}
