package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/etcd-conductor/etcd-conductor/etcdclient"
	"github.com/etcd-conductor/etcd-conductor/etcdclient/etcdtest"
	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/contract/snapshot"
	"github.com/etcd-conductor/etcd-conductor/internal/member/backup"
	"github.com/etcd-conductor/etcd-conductor/internal/member/restore"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
	"github.com/etcd-conductor/etcd-conductor/internal/store/backupstore"
	"github.com/etcd-conductor/etcd-conductor/test/s3server"
)

// TestInitStepRestoresFromTheEndpointOverride: the backup Secret names an endpoint where nothing
// listens, spec.backup.store.endpointOverride a real S3 server (versitygw) holding a full
// snapshot of a real etcd member. The init step, given the store flags the StatefulSet gives it,
// restores from the override; the Secret's endpoint alone would find nothing.
func TestInitStepRestoresFromTheEndpointOverride(t *testing.T) {
	if _, err := etcdtest.EtcdBinary(etcdtest.DefaultVersion); err != nil {
		t.Skip(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv := s3server.StartT(t, "", "backups")
	const prefix = "shoot/etcd-main"

	// A backup, taken as the member-agent takes it, in the override's store.
	wantRev := backupOf(ctx, t, srv, prefix)

	// The Secret as mounted: the server's credentials, region and path style, but an endpoint
	// where nothing listens.
	closed, err := etcdtest.FreePort("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	secretDir := t.TempDir()
	for k, v := range srv.SecretData() {
		if k == backupstore.KeyEndpoint {
			v = []byte("http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(closed)))
		}
		if err := os.WriteFile(filepath.Join(secretDir, k), v, 0o600); err != nil {
			t.Fatal(err)
		}
	}

	tests := []struct {
		name     string
		override string
		wantErr  bool
	}{
		{"the override reaches the restore", srv.Endpoint(), false},
		{"without it the Secret's endpoint is used, and nothing answers there", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			open := initStepOpener(t, tt.override, prefix, secretDir)
			store, err := open(ctx)
			if err != nil {
				t.Fatal(err)
			}
			rctx := ctx
			if tt.wantErr {
				// The store retries a refused connection; a few seconds show it is refused.
				var cancel context.CancelFunc
				rctx, cancel = context.WithTimeout(ctx, 3*time.Second)
				defer cancel()
			}
			peer, err := etcdtest.FreePort("127.0.0.1")
			if err != nil {
				t.Fatal(err)
			}
			res, err := restore.FromStore(rctx, store, snapshot.Owner{}, restore.Options{
				DataDir: filepath.Join(t.TempDir(), "new.etcd"), Name: "etcd-main-0",
				PeerURL: "http://127.0.0.1:" + strconv.Itoa(peer), Token: "restored", Log: testr.New(t),
			})
			switch {
			case tt.wantErr && (err == nil || !backupstore.IsUnreachable(err)):
				t.Fatalf("restore from %s without the override: %v %v, want the store unreachable", store, res, err)
			case !tt.wantErr && err != nil:
				t.Fatalf("restore from %s: %v", store, err)
			case !tt.wantErr && (res.Revision < wantRev || res.Keys < 100):
				t.Fatalf("restored %s, want revision %d and 100 keys at least", res, wantRev)
			}
			t.Logf("%s: %v %v", store, res, err)
		})
	}
}

// initStepOpener is the init step's store opener, parsed from the store flags the StatefulSet
// gives the member init container of an Etcd with this endpoint override, the Secret mounted at
// secretDir instead of in a pod.
func initStepOpener(t *testing.T, override, prefix, secretDir string) func(context.Context) (backupstore.Store, error) {
	t.Helper()
	e := &druidv1alpha1.Etcd{}
	e.Name, e.Namespace, e.Spec.Replicas = "etcd-main", "shoot", 1
	e.Spec.Etcd.ClientUrlTLS, e.Spec.Etcd.PeerUrlTLS = &druidv1alpha1.TLSConfig{}, &druidv1alpha1.PeerTLSConfig{}
	e.Spec.Backup = &druidv1alpha1.BackupSpec{Store: &druidv1alpha1.StoreSpec{
		Provider: ptr.To(druidv1alpha1.StorageProvider("aws")), Container: ptr.To("backups"), Prefix: prefix,
		SecretRef: &corev1.SecretReference{Name: "etcd-backup"}, EndpointOverride: ptr.To(override),
	}}
	// The test store (versitygw) serves plain http on loopback, as the operator allows when told.
	sts, err := resources.StatefulSet(e, resources.Settings{MemberAgentImage: "img", BackupReach: backupstore.Reach{AllowInsecureEndpoints: true}})
	if err != nil {
		t.Fatal(err)
	}
	init := sts.Spec.Template.Spec.InitContainers[0]
	var args []string
	for _, a := range init.Args[:slices.Index(init.Args, "--")] {
		name, _, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		switch {
		case name == "backup-secret-dir":
			args = append(args, "--backup-secret-dir="+secretDir)
		case slices.Contains(backupstore.FlagNames(), name):
			args = append(args, a)
		}
	}
	var o restoreOptions
	fs := flag.NewFlagSet("member-agent init", flag.ContinueOnError)
	o.register(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	open := o.opener()
	if open == nil {
		t.Fatalf("no store configured by %v", args)
	}
	return open
}

// backupOf writes keys into a real etcd member and uploads a full snapshot of it to the
// server's bucket under prefix, as the member-agent does; it returns the snapshot's revision.
func backupOf(ctx context.Context, t *testing.T, srv *s3server.Server, prefix string) int64 {
	t.Helper()
	c := etcdtest.Start(t, etcdtest.Config{Members: 1})
	conn, err := c.Dial(0)
	if err != nil {
		t.Fatal(err)
	}
	kv := pb.NewKVClient(conn)
	for i := range 100 {
		if _, err := kv.Put(ctx, &pb.PutRequest{Key: fmt.Appendf(nil, "key/%03d", i), Value: []byte("value")}); err != nil {
			t.Fatal(err)
		}
	}
	member, err := etcdclient.DialMember(c.Client, c.Members[0].Target(), etcdclient.Options{CallTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer member.Close()
	store, err := backupstore.New(backupstore.Config{Provider: "aws", Container: "backups", Prefix: prefix, Secret: srv.SecretData()})
	if err != nil {
		t.Fatal(err)
	}
	snap, _, err := backup.UploadFull(ctx, member, store, t.TempDir(), time.Now(), snapshot.CompressionNone)
	if err != nil {
		t.Fatal(err)
	}
	return snap.EndRevision
}
