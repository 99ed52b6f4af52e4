package backupstore_test

import (
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/etcd-conductor/etcd-conductor/internal/store/backupstore"
)

// TestFlagsRoundTrip: what Args renders, Register parses back to the same Flags, and every field
// of Flags is a flag (a field added without a flag would not reach the init step).
func TestFlagsRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		in   backupstore.Flags
	}{
		{"nothing set", backupstore.Flags{}},
		{"S3 with an override", backupstore.Flags{Provider: "aws", Container: "bucket", Prefix: "shoot/etcd-main",
			EndpointOverride: "https://s3.example:9000", SecretDir: "/var/etcd/backup-secret"}},
		{"Local", backupstore.Flags{Provider: "Local", Container: "dir", LocalRoot: "/var/etcd/backup-local"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out backupstore.Flags
			fs := flag.NewFlagSet("t", flag.ContinueOnError)
			out.Register(fs)
			if err := fs.Parse(tt.in.Args()); err != nil {
				t.Fatal(err)
			}
			if out != tt.in {
				t.Errorf("parsed %+v from %v, want %+v", out, tt.in.Args(), tt.in)
			}
		})
	}
	if fields, names := reflect.TypeFor[backupstore.Flags]().NumField(), backupstore.FlagNames(); fields != len(names) {
		t.Errorf("Flags has %d fields but %d flags (%v)", fields, len(names), names)
	}
}

// TestFlagsConfigCarriesTheSecret: the region, path style and CA of the Secret, read from its
// mounted directory, reach the S3 settings, and the endpoint override replaces its endpoint.
func TestFlagsConfigCarriesTheSecret(t *testing.T) {
	dir := t.TempDir()
	for k, v := range map[string]string{
		backupstore.KeyAccessKeyID: "AK", backupstore.KeySecretAccessKey: "SK", backupstore.KeyRegion: "eu-central-1",
		backupstore.KeyEndpoint: "https://secret.example:1", backupstore.KeyForcePathStyle: "true",
		backupstore.KeyTrustedCACert: "-----BEGIN CERTIFICATE-----",
	} {
		if err := os.WriteFile(filepath.Join(dir, k), []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	f := backupstore.Flags{Provider: "S3", Container: "b", EndpointOverride: "http://override.example:9000", SecretDir: dir}
	cfg, err := f.Config()
	if err != nil {
		t.Fatal(err)
	}
	s, err := backupstore.ParseS3Secret(backupstore.WithEndpointOverride(cfg.Secret, cfg.EndpointOverride))
	if err != nil {
		t.Fatal(err)
	}
	if s.Endpoint != "override.example:9000" || s.Secure || s.Region != "eu-central-1" || !s.ForcePathStyle || len(s.TrustedCAPEM) == 0 {
		t.Errorf("settings %+v: want the override's endpoint with the Secret's region, path style and CA", s)
	}
}

// TestFlagsReach: a member process given the operator's endpoint allow-list refuses to build a
// store whose mounted Secret names an endpoint the list refuses (a tenant who rewrites the Secret
// after the operator checked it), and builds it when the list allows it.
func TestFlagsReach(t *testing.T) {
	dir := t.TempDir()
	for k, v := range map[string]string{backupstore.KeyAccessKeyID: "id", backupstore.KeySecretAccessKey: "key", backupstore.KeyEndpoint: "http://203.0.113.9:9000"} {
		if err := os.WriteFile(filepath.Join(dir, k), []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	f := backupstore.Flags{Provider: "S3", Container: "bucket", SecretDir: dir, Reach: backupstore.Reach{}.EndpointsFlag()}
	if _, err := f.Open(); err == nil || !strings.Contains(err.Error(), "http://203.0.113.9:9000 is plain http") {
		t.Errorf("Open() with the default allow-list = %v, want the http endpoint refused", err)
	}
	f.Reach = backupstore.Reach{Endpoints: []backupstore.EndpointRule{{Host: "203.0.113.9:9000", AllowInsecure: true}}}.EndpointsFlag()
	if _, err := f.Open(); err != nil {
		t.Errorf("Open() with the endpoint allowed = %v", err)
	}
	f.Reach = ""
	if _, err := f.Open(); err != nil {
		t.Errorf("Open() without an allow-list = %v", err)
	}
}
