package tls_test

import (
	cryptotls "crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	conductortls "github.com/etcd-conductor/etcd-conductor/tls"
	"github.com/etcd-conductor/etcd-conductor/tls/testpki"
)

type fixture struct {
	ca, otherCA                          *testpki.CA
	client, otherClient, server, expired testpki.KeyPair
	serverOnly                           testpki.KeyPair
}

func newFixture(t *testing.T) fixture {
	t.Helper()
	var f fixture
	var err error
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	f.ca, err = testpki.NewCA("test-ca")
	must(err)
	f.otherCA, err = testpki.NewCA("other-ca")
	must(err)
	f.client, err = f.ca.ClientCert("client")
	must(err)
	f.otherClient, err = f.otherCA.ClientCert("client")
	must(err)
	f.server, err = f.ca.ServerCert("server", testpki.MemberServerDNSNames("main", "ns"), testpki.MemberServerIPs())
	must(err)
	f.serverOnly, err = f.ca.Issue(testpki.Request{CommonName: "server-only", Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	must(err)
	f.expired, err = f.ca.Issue(testpki.Request{
		CommonName: "expired", Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		NotBefore: time.Now().Add(-48 * time.Hour), Validity: time.Hour,
	})
	must(err)
	return f
}

func TestFromSecrets(t *testing.T) {
	f := newFixture(t)
	caSecret := f.ca.Secret("ns", "main-ca")
	valid := testpki.TLSSecret("ns", "main-client-tls", f.ca, f.client)

	withData := func(s *corev1.Secret, key string, value []byte) *corev1.Secret {
		s = s.DeepCopy()
		if value == nil {
			delete(s.Data, key)
		} else {
			s.Data[key] = value
		}
		return s
	}

	tests := []struct {
		name         string
		caSecret     *corev1.Secret
		caDataKey    string
		clientSecret *corev1.Secret
		wantErr      []string // substrings the error must contain; nil means success
	}{
		{name: "valid with default data key", caSecret: caSecret, clientSecret: valid},
		{name: "valid with explicit data key", caSecret: withData(caSecret, "bundle.pem", f.ca.CertPEM), caDataKey: "bundle.pem", clientSecret: valid},
		{name: "nil CA secret", caSecret: nil, clientSecret: valid, wantErr: []string{"CA secret is missing"}},
		{name: "nil client secret", caSecret: caSecret, clientSecret: nil, wantErr: []string{"client TLS secret is missing"}},
		{name: "CA key missing", caSecret: caSecret, caDataKey: "bundle.pem", clientSecret: valid,
			wantErr: []string{"ns/main-ca", `"bundle.pem"`, "missing"}},
		{name: "tls.crt missing", caSecret: caSecret, clientSecret: withData(valid, "tls.crt", nil),
			wantErr: []string{"ns/main-client-tls", `"tls.crt"`, "missing"}},
		{name: "tls.key missing", caSecret: caSecret, clientSecret: withData(valid, "tls.key", nil),
			wantErr: []string{"ns/main-client-tls", `"tls.key"`, "missing"}},
		{name: "CA unparsable", caSecret: withData(caSecret, "ca.crt", []byte("not pem")), clientSecret: valid,
			wantErr: []string{"ns/main-ca", `"ca.crt"`, "no PEM CERTIFICATE"}},
		{name: "cert unparsable", caSecret: caSecret, clientSecret: withData(valid, "tls.crt", []byte("garbage")),
			wantErr: []string{"ns/main-client-tls", `"tls.crt"`}},
		{name: "key unparsable", caSecret: caSecret, clientSecret: withData(valid, "tls.key", []byte("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n")),
			wantErr: []string{"ns/main-client-tls", `"tls.key"`}},
		{name: "key of another pair", caSecret: caSecret, clientSecret: withData(valid, "tls.key", f.otherClient.KeyPEM),
			wantErr: []string{"does not match key"}},
		{name: "cert from another CA", caSecret: caSecret, clientSecret: testpki.TLSSecret("ns", "main-client-tls", f.otherCA, f.otherClient),
			wantErr: []string{"not valid for client auth", "ns/main-ca"}},
		{name: "cert without client auth usage", caSecret: caSecret, clientSecret: testpki.TLSSecret("ns", "main-client-tls", f.ca, f.serverOnly),
			wantErr: []string{"not valid for client auth"}},
		{name: "expired cert", caSecret: caSecret, clientSecret: testpki.TLSSecret("ns", "main-client-tls", f.ca, f.expired),
			wantErr: []string{"expired"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := conductortls.FromSecrets(tt.caSecret, tt.caDataKey, tt.clientSecret)
			if tt.wantErr == nil {
				if err != nil {
					t.Fatalf("FromSecrets: %v", err)
				}
				if string(m.Cert) != string(f.client.CertPEM) || string(m.Key) != string(f.client.KeyPEM) || string(m.CA) != string(f.ca.CertPEM) {
					t.Fatal("material does not hold the secret's data")
				}
				return
			}
			if err == nil {
				t.Fatalf("FromSecrets succeeded, want error containing %q", tt.wantErr)
			}
			for _, want := range tt.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
		})
	}
}

func TestLoadFiles(t *testing.T) {
	f := newFixture(t)
	dir := t.TempDir()
	files, err := testpki.WriteFiles(dir, f.ca, f.client)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("valid", func(t *testing.T) {
		m, err := conductortls.LoadFiles(files.CA, files.Cert, files.Key)
		if err != nil {
			t.Fatalf("LoadFiles: %v", err)
		}
		if m.Fingerprint() != f.ca.ClientMaterial(f.client).Fingerprint() {
			t.Fatal("loaded material differs from the written one")
		}
	})
	t.Run("missing file is named", func(t *testing.T) {
		missing := filepath.Join(dir, "nope.crt")
		_, err := conductortls.LoadFiles(files.CA, missing, files.Key)
		if err == nil || !strings.Contains(err.Error(), missing) {
			t.Fatalf("got %v, want an error naming %s", err, missing)
		}
	})
	t.Run("mismatched key names both files", func(t *testing.T) {
		otherKey := filepath.Join(dir, "other.key")
		if err := os.WriteFile(otherKey, f.otherClient.KeyPEM, 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := conductortls.LoadFiles(files.CA, files.Cert, otherKey)
		if err == nil || !strings.Contains(err.Error(), files.Cert) || !strings.Contains(err.Error(), otherKey) {
			t.Fatalf("got %v, want an error naming %s and %s", err, files.Cert, otherKey)
		}
	})
}

func TestFingerprint(t *testing.T) {
	f := newFixture(t)
	base := f.ca.ClientMaterial(f.client)
	if base.Fingerprint() != f.ca.ClientMaterial(f.client).Fingerprint() {
		t.Fatal("fingerprint of equal material differs")
	}
	rotated, err := f.ca.ClientCert("client")
	if err != nil {
		t.Fatal(err)
	}
	changes := map[string]conductortls.ClientMaterial{
		"rotated cert and key": f.ca.ClientMaterial(rotated),
		"other CA bundle":      {CA: f.otherCA.CertPEM, Cert: base.Cert, Key: base.Key},
		"bytes moved between parts": {
			CA: base.CA[:len(base.CA)-1], Cert: append([]byte{base.CA[len(base.CA)-1]}, base.Cert...), Key: base.Key,
		},
	}
	for name, m := range changes {
		t.Run(name, func(t *testing.T) {
			if m.Fingerprint() == base.Fingerprint() {
				t.Fatal("fingerprint did not change")
			}
		})
	}
}

// TestValidUntil: the first expiry among the CA bundle and the client chain.
func TestValidUntil(t *testing.T) {
	f := newFixture(t)
	shortLived, err := f.ca.Issue(testpki.Request{CommonName: "short-lived", Validity: 2 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	notAfter := func(pemData []byte) time.Time {
		t.Helper()
		block, _ := pem.Decode(pemData)
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		return c.NotAfter
	}
	for _, tc := range []struct {
		name string
		m    conductortls.ClientMaterial
		want time.Time
	}{
		{"the client certificate expires first", f.ca.ClientMaterial(shortLived), notAfter(shortLived.CertPEM)},
		{"a certificate in the CA bundle expires first", conductortls.ClientMaterial{CA: append(append([]byte{}, f.ca.CertPEM...), shortLived.CertPEM...),
			Cert: f.client.CertPEM, Key: f.client.KeyPEM}, notAfter(shortLived.CertPEM)},
		{"no certificate", conductortls.ClientMaterial{}, time.Time{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.m.ValidUntil(); !got.Equal(tc.want) {
				t.Errorf("ValidUntil() = %s, want %s", got, tc.want)
			}
		})
	}
}

// TestConfig handshakes with a real TLS listener that demands a client certificate.
func TestConfig(t *testing.T) {
	f := newFixture(t)
	member := listenMember(t, f, 0)
	// A member configured with --tls-max-version TLS1.2.
	tls12Member := listenMember(t, f, cryptotls.VersionTLS12)

	tests := []struct {
		name       string
		material   conductortls.ClientMaterial
		serverName string
		addr       string
		wantErr    string
	}{
		{name: "member name under the peer wildcard", material: f.ca.ClientMaterial(f.client), serverName: "main-1.main-peer.ns.svc"},
		{name: "client service name", material: f.ca.ClientMaterial(f.client), serverName: "main-client.ns.svc.cluster.local"},
		{name: "name not in SANs", material: f.ca.ClientMaterial(f.client), serverName: "main-1.other-peer.ns.svc", wantErr: "certificate is valid for"},
		{name: "server from another CA", material: conductortls.ClientMaterial{CA: f.otherCA.CertPEM, Cert: f.client.CertPEM, Key: f.client.KeyPEM},
			serverName: "main-1.main-peer.ns.svc", wantErr: "unknown authority"},
		{name: "empty server name", material: f.ca.ClientMaterial(f.client), serverName: "", wantErr: "server name is required"},
		{name: "member offering only TLS 1.2", material: f.ca.ClientMaterial(f.client), serverName: "main-1.main-peer.ns.svc",
			addr: tls12Member, wantErr: "protocol version"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := tt.material.Config(tt.serverName)
			if err == nil {
				if cfg.MinVersion < cryptotls.VersionTLS13 || cfg.RootCAs == nil {
					t.Fatalf("unsafe config: %+v", cfg)
				}
				addr := tt.addr
				if addr == "" {
					addr = member
				}
				err = handshake(addr, cfg)
			}
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("handshake: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("got %v, want error containing %q", err, tt.wantErr)
			}
		})
	}
}

// listenMember serves like an etcd member: the server certificate of the fixture, client
// certificates required. maxVersion 0 leaves the version range at Go's default. It returns the
// listener's address.
func listenMember(t *testing.T, f fixture, maxVersion uint16) string {
	t.Helper()
	serverPair, err := cryptotls.X509KeyPair(f.server.CertPEM, f.server.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	clientCAs := x509.NewCertPool()
	clientCAs.AddCert(f.ca.Cert)
	ln, err := cryptotls.Listen("tcp", "127.0.0.1:0", &cryptotls.Config{
		Certificates: []cryptotls.Certificate{serverPair},
		ClientAuth:   cryptotls.RequireAndVerifyClientCert,
		ClientCAs:    clientCAs,
		MaxVersion:   maxVersion,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_ = c.(*cryptotls.Conn).Handshake()
				_, _ = c.Write([]byte("x"))
			}()
		}
	}()
	return ln.Addr().String()
}

func handshake(addr string, cfg *cryptotls.Config) error {
	conn, err := cryptotls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		return err
	}
	defer conn.Close()
	// The server only rejects a bad client certificate after the client's handshake finished
	// (TLS 1.3), so read to see its verdict.
	buf := make([]byte, 1)
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = conn.Read(buf)
	return err
}
