package integration

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/etcd-conductor/etcd-conductor/etcdclient/etcdtest"
	"github.com/etcd-conductor/etcd-conductor/internal/contract/memberlease"
	"github.com/etcd-conductor/etcd-conductor/internal/contract/snapshot"
	"github.com/etcd-conductor/etcd-conductor/internal/member/backup"
	"github.com/etcd-conductor/etcd-conductor/internal/store/backupstore"
	"github.com/etcd-conductor/etcd-conductor/test/framework"
	"github.com/etcd-conductor/etcd-conductor/test/s3server"
)

// TestTwoEtcdsOnOneStore: two Etcds' member-agents back up to one bucket and prefix. The first
// claims it and goes on; the second writes nothing there, deletes nothing, and says why on its
// snapshot Leases (BackupReady's reason StoreShared); both clusters keep serving.
func TestTwoEtcdsOnOneStore(t *testing.T) {
	env := sharedControlPlane(t)
	ns := testNamespace("backup-shared")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := framework.CreateNamespace(ctx, env.Client(), ns, nil); err != nil {
		t.Fatal(err)
	}
	kube, err := kubernetes.NewForConfig(env.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	srv := s3server.StartT(t, "", "shared")
	secretDir := writeSecretDir(t, srv.SecretData())
	clusters := map[string]*etcdtest.Cluster{}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	for _, name := range []string{"first", "second"} {
		clusters[name] = startBackupLoop(runCtx, t, kube, ns, name,
			backupstore.Flags{Provider: "S3", Container: "shared", Prefix: "etcd", SecretDir: secretDir, Etcd: ns + "/" + name, EtcdUID: name + "-uid"})
		if name == "first" {
			framework.Eventually(t, time.Minute, "the first Etcd's full snapshot", func(ctx context.Context) (bool, string) {
				rec, err := snapshotLease(ctx, kube, ns, "first-full-snap")
				return err == nil && rec.Revision > 0, fmt.Sprintf("%+v %v", rec, err)
			})
		}
	}

	framework.Eventually(t, time.Minute, "the second Etcd refused, and saying so", func(ctx context.Context) (bool, string) {
		rec, err := snapshotLease(ctx, kube, ns, "second-delta-snap")
		return err == nil && rec.ErrorReason == memberlease.ReasonStoreShared, fmt.Sprintf("%+v %v", rec, err)
	})
	for name, c := range clusters {
		cc, err := c.Dial(0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := pb.NewKVClient(cc).Put(ctx, &pb.PutRequest{Key: []byte("still"), Value: []byte("serving")}); err != nil {
			t.Errorf("Etcd %s no longer serves: %v", name, err)
		}
	}
	time.Sleep(time.Second) // the first keeps writing deltas meanwhile
	stop()

	store, err := backupstore.New(backupstore.Config{Provider: "S3", Container: "shared", Prefix: "etcd", Secret: srv.SecretData()})
	if err != nil {
		t.Fatal(err)
	}
	objs, err := store.List(ctx, snapshot.Dir)
	if err != nil {
		t.Fatal(err)
	}
	deltas := 0
	for _, o := range objs {
		s, err := snapshot.Parse(o.Key)
		if err != nil || s.Kind != snapshot.KindDelta {
			continue
		}
		f, err := backup.ReadDeltaObject(ctx, store, s)
		if err != nil {
			t.Fatal(err)
		}
		if f.Origin == nil || f.Origin.Etcd != ns+"/first" {
			t.Errorf("delta %s written by %+v; only the first Etcd writes here", o.Key, f.Origin)
		}
		deltas++
	}
	if deltas == 0 {
		t.Error("the first Etcd wrote no delta after the second was refused")
	}
	var shared *backup.SharedError
	if _, err := backup.Claim(ctx, store, snapshot.Owner{Etcd: ns + "/second"}, false); !errors.As(err, &shared) {
		t.Errorf("claim for the second Etcd: %v, want a SharedError", err)
	}
}

func snapshotLease(ctx context.Context, kube kubernetes.Interface, ns, name string) (memberlease.SnapshotLeaseRecord, error) {
	l, err := kube.CoordinationV1().Leases(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return memberlease.SnapshotLeaseRecord{}, err
	}
	return memberlease.ParseSnapshotLease(l.Spec.HolderIdentity, l.Spec.RenewTime, l.Annotations), nil
}
