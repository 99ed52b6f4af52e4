package backupstore

import (
	"errors"
	"strings"
	"testing"
)

func TestReachLocalRoot(t *testing.T) {
	custom := Reach{LocalRoots: []string{"/var/backups", "/srv/etcd"}}
	tests := []struct {
		name     string
		reach    Reach
		hostPath string
		want     string
		wantErr  string
	}{
		{"no key: etcd-druid's default, allowed by default", Reach{}, "", DefaultLocalHostPath, ""},
		{"the default itself", Reach{}, DefaultLocalHostPath, DefaultLocalHostPath, ""},
		{"a root the default list does not name", Reach{}, "/var/backups", "", "not one of the host directories"},
		{"a listed root", custom, "/srv/etcd", "/srv/etcd", ""},
		{"the default, when a list names others", custom, "", "", "not one of the host directories"},
		{"below a listed root: it could compose into another Etcd's directory", custom, "/var/backups/shoot", "", "not one of the host directories"},
		{"inside the default, where other Etcds' directories are", Reach{}, DefaultLocalHostPath + "/shoot/etcd-main", "", "not one of"},
		{"relative", custom, "var/backups", "", "not an absolute clean path"},
		{"dot-dot", custom, "/var/backups/../srv/etcd", "", "not an absolute clean path"},
		{"trailing slash", custom, "/var/backups/", "", "not an absolute clean path"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			secret := map[string][]byte{}
			if tt.hostPath != "" {
				secret[KeyHostPath] = []byte(tt.hostPath)
			}
			got, err := tt.reach.LocalRoot(secret)
			var serr *SecretError
			switch {
			case tt.wantErr != "" && (!errors.As(err, &serr) || serr.Key != KeyHostPath || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("LocalRoot(%q) = %q, %v; want a SecretError for %s saying %q", tt.hostPath, got, err, KeyHostPath, tt.wantErr)
			case tt.wantErr == "" && (err != nil || got != tt.want):
				t.Fatalf("LocalRoot(%q) = %q, %v; want %q", tt.hostPath, got, err, tt.want)
			}
		})
	}
}

func TestReachValidate(t *testing.T) {
	for _, tt := range []struct {
		name    string
		reach   Reach
		wantErr string
	}{
		{"defaults", Reach{}, ""},
		{"separate roots", Reach{LocalRoots: []string{"/a/b", "/a/c"}}, ""},
		{"nested roots", Reach{LocalRoots: []string{"/data", "/data/team"}}, "lies inside"},
		{"the same root twice", Reach{LocalRoots: []string{"/data", "/data"}}, "lies inside"},
		{"relative root", Reach{LocalRoots: []string{"data"}}, "absolute clean"},
		{"the host's root", Reach{LocalRoots: []string{"/"}}, "other than /"},
		{"patterns", Reach{Endpoints: []EndpointRule{{Host: "*.example.com"}, {Host: "127.0.0.1:9000"}, {Host: "*"}}}, ""},
		{"a wildcard inside", Reach{Endpoints: []EndpointRule{{Host: "s3.*.com"}}}, "not a host"},
		{"a URL", Reach{Endpoints: []EndpointRule{{Host: "https://s3.example"}}}, "not a host"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.reach.Validate()
			if (tt.wantErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("Validate() = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

func TestReachEndpoint(t *testing.T) {
	listed := Reach{Endpoints: []EndpointRule{{Host: "*.s3.example"}, {Host: "127.0.0.1:9000", AllowInsecure: true}, {Host: "minio.internal"}}}
	for _, tt := range []struct {
		name     string
		reach    Reach
		endpoint string
		secure   bool
		wantErr  string
	}{
		{"default: any https host", Reach{}, "s3.eu-west-1.amazonaws.com", true, ""},
		{"default: http refused", Reach{}, "10.0.0.1:9000", false, "http://10.0.0.1:9000 is plain http"},
		{"default with allowInsecureEndpoints", Reach{AllowInsecureEndpoints: true}, "10.0.0.1:9000", false, ""},
		{"a name below a wildcard", listed, "eu.s3.example", true, ""},
		{"the wildcard's own domain is not below it", listed, "s3.example", true, "not an endpoint the operator allows"},
		{"a look-alike domain", listed, "evil-s3.example", true, "not an endpoint"},
		{"another host", listed, "attacker.example:443", true, "https://attacker.example:443 is not an endpoint"},
		{"an entry with a port and allowInsecure", listed, "127.0.0.1:9000", false, ""},
		{"the same host on another port", listed, "127.0.0.1:9001", false, "not an endpoint"},
		{"an entry without allowInsecure, over http", listed, "minio.internal:9000", false, "plain http"},
		{"case and a trailing dot do not matter", listed, "MINIO.internal.", true, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.reach.CheckEndpoint(S3Settings{Endpoint: tt.endpoint, Secure: tt.secure})
			var serr *SecretError
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (!errors.As(err, &serr) || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("CheckEndpoint(%s) = %v, want %q", tt.endpoint, err, tt.wantErr)
			}
		})
	}
}
