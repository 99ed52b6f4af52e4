package backupstore

import (
	"errors"
	"strings"
	"testing"
)

func TestNewRefusesBadInput(t *testing.T) {
	good := map[string][]byte{KeyAccessKeyID: []byte("a"), KeySecretAccessKey: []byte("s"), KeyRegion: []byte("eu-west-1")}
	with := func(k, v string) map[string][]byte {
		m := map[string][]byte{}
		for kk, vv := range good {
			m[kk] = vv
		}
		if v == "" {
			delete(m, k)
		} else {
			m[k] = []byte(v)
		}
		return m
	}
	tests := []struct {
		name      string
		cfg       Config
		provider  bool // a *ProviderError
		secretKey string
	}{
		{"unknown provider", Config{Provider: "floppy", Container: "b"}, true, ""},
		{"druid provider not here", Config{Provider: "gcp", Container: "b"}, true, ""},
		{"no provider", Config{Container: "b"}, true, ""},
		{"no access key", Config{Provider: "aws", Container: "b", Secret: with(KeyAccessKeyID, "")}, false, KeyAccessKeyID},
		{"no secret key", Config{Provider: "S3", Container: "b", Secret: with(KeySecretAccessKey, "")}, false, KeySecretAccessKey},
		{"AWS without region", Config{Provider: "aws", Container: "b", Secret: with(KeyRegion, "")}, false, KeyRegion},
		{"insecureSkipVerify", Config{Provider: "aws", Container: "b", Secret: with(KeyInsecureSkipVerify, "true")}, false, KeyInsecureSkipVerify},
		{"bad bool", Config{Provider: "aws", Container: "b", Secret: with(KeyForcePathStyle, "yes please")}, false, KeyForcePathStyle},
		{"endpoint with a path", Config{Provider: "aws", Container: "b", Secret: with(KeyEndpoint, "https://s3.example/bucket")}, false, KeyEndpoint},
		{"CA without a certificate", Config{Provider: "aws", Container: "b", Secret: with(KeyTrustedCACert, "not pem")}, false, KeyTrustedCACert},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.cfg)
			var perr *ProviderError
			var serr *SecretError
			switch {
			case tt.provider && !errors.As(err, &perr):
				t.Fatalf("New: %v, want a ProviderError", err)
			case !tt.provider && (!errors.As(err, &serr) || serr.Key != tt.secretKey):
				t.Fatalf("New: %v, want a SecretError for %s", err, tt.secretKey)
			}
		})
	}
}

func TestParseS3SecretEndpoints(t *testing.T) {
	base := map[string][]byte{KeyAccessKeyID: []byte("a"), KeySecretAccessKey: []byte("s")}
	tests := []struct {
		endpoint, disableSSL, region string
		wantHost                     string
		wantSecure                   bool
	}{
		{"", "", "eu-west-1", "s3.eu-west-1.amazonaws.com", true},
		{"http://10.213.0.1:7070", "", "", "10.213.0.1:7070", false},
		{"https://minio.example:9000/", "", "", "minio.example:9000", true},
		{"minio.example:9000", "true", "", "minio.example:9000", false},
	}
	for _, tt := range tests {
		t.Run(tt.endpoint, func(t *testing.T) {
			data := map[string][]byte{}
			for k, v := range base {
				data[k] = v
			}
			data[KeyEndpoint], data[KeyRegion] = []byte(tt.endpoint), []byte(tt.region)
			if tt.disableSSL != "" {
				data[KeyDisableSSL] = []byte(tt.disableSSL)
			}
			s, err := ParseS3Secret(data)
			if err != nil {
				t.Fatal(err)
			}
			if s.Endpoint != tt.wantHost || s.Secure != tt.wantSecure || s.Region == "" {
				t.Fatalf("got %+v", s)
			}
			if strings.Contains(s.Endpoint, "://") {
				t.Fatalf("endpoint %q keeps its scheme", s.Endpoint)
			}
		})
	}
}

func TestConfigLocation(t *testing.T) {
	secret := map[string][]byte{KeyAccessKeyID: []byte("id"), KeySecretAccessKey: []byte("key"), KeyEndpoint: []byte("http://s3.local:9000")}
	base := Config{Provider: "aws", Container: "bucket", Prefix: "etcd/", Secret: secret}
	for _, tt := range []struct {
		name string
		cfg  Config
		same bool
	}{
		{"same objects under another provider name and prefix spelling", Config{Provider: "S3", Container: "bucket", Prefix: "/etcd", Secret: secret}, true},
		{"another prefix", Config{Provider: "aws", Container: "bucket", Prefix: "other", Secret: secret}, false},
		{"another endpoint by override", Config{Provider: "aws", Container: "bucket", Prefix: "etcd", Secret: secret, EndpointOverride: "http://other:9000"}, false},
		{"a Local directory", Config{Provider: "Local", Container: "bucket", Prefix: "etcd", LocalRoot: "/data"}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := base.Location() == tt.cfg.Location(); got != tt.same {
				t.Errorf("%q vs %q: same %t, want %t", base.Location(), tt.cfg.Location(), got, tt.same)
			}
		})
	}
	if (Config{Provider: "gcp"}).Location() != "" {
		t.Error("a configuration that cannot be opened has a location")
	}
}
