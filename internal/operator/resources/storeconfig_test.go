package resources

import (
	"cmp"
	"strings"
	"testing"

	"k8s.io/utils/ptr"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/store/backupstore"
)

func TestStoreConfig(t *testing.T) {
	spec := func(provider, container string) druidv1alpha1.StoreSpec {
		return druidv1alpha1.StoreSpec{Provider: ptr.To(druidv1alpha1.StorageProvider(provider)), Container: ptr.To(container), Prefix: "etcd-main"}
	}
	s3 := map[string][]byte{backupstore.KeyAccessKeyID: []byte("id"), backupstore.KeySecretAccessKey: []byte("key"), backupstore.KeyRegion: []byte("eu-west-1")}
	tests := []struct {
		name      string
		store     druidv1alpha1.StoreSpec
		secret    map[string][]byte
		reach     backupstore.Reach
		wantErr   string
		wantLocal string // the boundary the Local store is opened within
		wantDir   string // the container below it
	}{
		{name: "aws", store: spec("aws", "bucket"), secret: s3},
		{name: "Local without a Secret: etcd-druid's host directory", store: spec("Local", "shoot/etcd-main/dir"),
			wantLocal: backupstore.DefaultLocalHostPath + "/shoot/etcd-main", wantDir: "dir"},
		{name: "Local with an allowed hostPath", store: spec("Local", "shoot/etcd-main/dir"), secret: map[string][]byte{backupstore.KeyHostPath: []byte("/data/backups")},
			reach: backupstore.Reach{LocalRoots: []string{"/data/backups"}}, wantLocal: "/data/backups/shoot/etcd-main", wantDir: "dir"},
		{name: "Local deeper below an Etcd's directory", store: spec("Local", "/shoot/etcd-main/dir/sub/"), wantLocal: backupstore.DefaultLocalHostPath + "/shoot/etcd-main", wantDir: "dir/sub"},
		{name: "Local with a hostPath the operator does not allow", store: spec("Local", "shoot/etcd-main/dir"), secret: map[string][]byte{backupstore.KeyHostPath: []byte("/data/backups")},
			wantErr: "key hostPath of the Secret: \"/data/backups\" is not one of the host directories"},
		{name: "Local with a relative hostPath", store: spec("Local", "shoot/etcd-main/dir"), secret: map[string][]byte{backupstore.KeyHostPath: []byte("data")}, wantErr: "key hostPath of the Secret"},
		{name: "Local in another namespace's directory", store: spec("Local", "other/etcd-main/dir"), wantErr: `container "other/etcd-main/dir": a Local store of a task in namespace shoot is a directory below shoot/`},
		{name: "Local as the namespace's whole directory", store: spec("Local", "shoot"), wantErr: "below shoot/"},
		// An Etcd's directory is where its pods write: a link they plant must not lead to a
		// sibling's, so the store is one of its containers, never the directory itself.
		{name: "Local as an Etcd's whole directory", store: spec("Local", "shoot/etcd-main"), wantErr: "below shoot/"},
		{name: "Local with an empty element", store: spec("Local", "shoot//etcd-main"), wantErr: "empty path element"},
		{name: "Local escaping by ..", store: spec("Local", "shoot/../other/etcd"), wantErr: "no \"..\""},
		{name: "S3 over http refused by default", store: spec("S3", "bucket"), secret: map[string][]byte{backupstore.KeyAccessKeyID: []byte("id"), backupstore.KeySecretAccessKey: []byte("key"),
			backupstore.KeyEndpoint: []byte("http://10.0.0.1:9000")}, wantErr: "key endpoint of the Secret: http://10.0.0.1:9000 is plain http"},
		{name: "S3 endpoint not in the list", store: spec("S3", "bucket"), secret: s3, reach: backupstore.Reach{Endpoints: []backupstore.EndpointRule{{Host: "minio.internal"}}},
			wantErr: "https://s3.eu-west-1.amazonaws.com is not an endpoint the operator allows"},
		{name: "provider not supported", store: spec("gcp", "bucket"), secret: s3, wantErr: `provider: backup store provider "gcp" is not supported here`},
		{name: "no container", store: spec("aws", ""), secret: s3, wantErr: "container is not set"},
		{name: "S3 without a Secret", store: spec("S3", "bucket"), wantErr: "secretRef is not set"},
		{name: "S3 Secret without a key", store: spec("S3", "bucket"), secret: map[string][]byte{backupstore.KeyAccessKeyID: []byte("id")}, wantErr: "key secretAccessKey of the Secret: missing or empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := StoreConfig(tt.store, tt.secret, tt.reach, "shoot")
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one saying %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			wantContainer := cmp.Or(tt.wantDir, *tt.store.Container)
			if cfg.Container != wantContainer || cfg.Prefix != tt.store.Prefix || cfg.LocalRoot != tt.wantLocal {
				t.Errorf("config %+v", cfg)
			}
			// An S3 store opens without contacting the server (a Local one would create its directory).
			if tt.wantLocal == "" {
				if _, err := backupstore.New(cfg); err != nil {
					t.Errorf("the configuration does not open: %v", err)
				}
			}
		})
	}
}
