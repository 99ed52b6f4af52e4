package tls

import (
	"crypto/sha256"
	cryptotls "crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Keys of a cert-manager Certificate Secret (type kubernetes.io/tls).
const (
	DefaultCADataKey = "ca.crt"
	CertDataKey      = corev1.TLSCertKey       // tls.crt
	KeyDataKey       = corev1.TLSPrivateKeyKey // tls.key
)

// ClientMaterial is the PEM-encoded trust bundle and client identity used to talk to etcd members.
type ClientMaterial struct {
	CA   []byte
	Cert []byte
	Key  []byte
	// Plaintext: the members serve clients over plain HTTP (an Etcd without clientUrlTls, as
	// etcd-druid runs it), so there is nothing to verify and nothing to present. Explicit rather
	// than an empty material, so that material that failed to load is never taken as "no TLS".
	Plaintext bool
}

// PlaintextMaterial is what a client of members without client TLS uses.
func PlaintextMaterial() ClientMaterial { return ClientMaterial{Plaintext: true} }

// Fingerprint identifies this exact material. It changes whenever any of the three parts is
// rotated, so callers can key cached connections on it.
func (m ClientMaterial) Fingerprint() string {
	h := sha256.New()
	if m.Plaintext {
		h.Write([]byte("plaintext"))
	}
	for _, part := range [][]byte{m.CA, m.Cert, m.Key} {
		// Length-prefixing keeps ("ab","c") and ("a","bc") from hashing alike.
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(part)))
		h.Write(n[:])
		h.Write(part)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// ValidUntil is when the first of the certificates in m (CA bundle and client chain) expires:
// until then a verification that passed passes again, so a caller may keep m that long without
// verifying it anew. Zero when m holds no certificate.
func (m ClientMaterial) ValidUntil() time.Time {
	var until time.Time
	for _, c := range append(allCertificates(m.CA), allCertificates(m.Cert)...) {
		if until.IsZero() || c.NotAfter.Before(until) {
			until = c.NotAfter
		}
	}
	return until
}

// Config builds a client TLS configuration that verifies the server against the CA bundle and
// serverName against its SANs. serverName is required: members are dialled by pod IP, and the
// member's DNS name is what its certificate carries. TLS 1.3 is the minimum: every etcd release
// the operator runs (3.6, 3.7) serves it, and a member that offers only 1.2 has been configured
// down on purpose (--tls-max-version), which the operator refuses rather than follows.
func (m ClientMaterial) Config(serverName string) (*cryptotls.Config, error) {
	if serverName == "" {
		return nil, errors.New("tls: server name is required to verify the member certificate")
	}
	roots, err := certPool(m.CA)
	if err != nil {
		return nil, fmt.Errorf("tls: CA bundle: %w", err)
	}
	pair, err := cryptotls.X509KeyPair(m.Cert, m.Key)
	if err != nil {
		return nil, fmt.Errorf("tls: client certificate and key: %w", err)
	}
	return &cryptotls.Config{
		MinVersion:   cryptotls.VersionTLS13,
		RootCAs:      roots,
		ServerName:   serverName,
		Certificates: []cryptotls.Certificate{pair},
	}, nil
}

// ConfigOrPlain is Config, or nil for plaintext material: the TLS configuration of an HTTP or
// gRPC client of the member, where nil means plain HTTP.
func (m ClientMaterial) ConfigOrPlain(serverName string) (*cryptotls.Config, error) {
	if m.Plaintext {
		return nil, nil
	}
	return m.Config(serverName)
}

// FromSecrets reads the CA bundle from caSecret[caDataKey] (ca.crt when empty) and the client
// identity from clientSecret's tls.crt and tls.key, and checks that the pair belongs together and
// that the certificate chains to the CA for client authentication.
func FromSecrets(caSecret *corev1.Secret, caDataKey string, clientSecret *corev1.Secret) (ClientMaterial, error) {
	if caDataKey == "" {
		caDataKey = DefaultCADataKey
	}
	if caSecret == nil {
		return ClientMaterial{}, errors.New("tls: CA secret is missing")
	}
	if clientSecret == nil {
		return ClientMaterial{}, errors.New("tls: client TLS secret is missing")
	}
	ca, err := secretValue(caSecret, caDataKey)
	if err != nil {
		return ClientMaterial{}, err
	}
	cert, err := secretValue(clientSecret, CertDataKey)
	if err != nil {
		return ClientMaterial{}, err
	}
	key, err := secretValue(clientSecret, KeyDataKey)
	if err != nil {
		return ClientMaterial{}, err
	}
	m := ClientMaterial{CA: ca, Cert: cert, Key: key}
	err = m.verify(source{
		ca:   secretRef(caSecret, caDataKey),
		cert: secretRef(clientSecret, CertDataKey),
		key:  secretRef(clientSecret, KeyDataKey),
	})
	if err != nil {
		return ClientMaterial{}, err
	}
	return m, nil
}

// LoadFiles reads and verifies the material from PEM files, as mounted into the member-agent.
func LoadFiles(caFile, certFile, keyFile string) (ClientMaterial, error) {
	var m ClientMaterial
	for _, f := range []struct {
		path string
		dst  *[]byte
	}{{caFile, &m.CA}, {certFile, &m.Cert}, {keyFile, &m.Key}} {
		data, err := os.ReadFile(f.path)
		if err != nil {
			return ClientMaterial{}, fmt.Errorf("tls: %w", err)
		}
		*f.dst = data
	}
	if err := m.verify(source{ca: caFile, cert: certFile, key: keyFile}); err != nil {
		return ClientMaterial{}, err
	}
	return m, nil
}

// source names where each part came from, for error messages.
type source struct{ ca, cert, key string }

func (m ClientMaterial) verify(src source) error {
	roots, err := certPool(m.CA)
	if err != nil {
		return fmt.Errorf("tls: CA bundle %s: %w", src.ca, err)
	}
	leaf, err := firstCertificate(m.Cert)
	if err != nil {
		return fmt.Errorf("tls: client certificate %s: %w", src.cert, err)
	}
	if err := checkPrivateKey(m.Key); err != nil {
		return fmt.Errorf("tls: client key %s: %w", src.key, err)
	}
	if _, err := cryptotls.X509KeyPair(m.Cert, m.Key); err != nil {
		return fmt.Errorf("tls: client certificate %s does not match key %s: %w", src.cert, src.key, err)
	}
	intermediates := x509.NewCertPool()
	for _, c := range allCertificates(m.Cert)[1:] {
		intermediates.AddCert(c)
	}
	_, err = leaf.Verify(x509.VerifyOptions{
		Roots:         roots,
		Intermediates: intermediates,
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		return fmt.Errorf("tls: client certificate %s (subject %q) is not valid for client auth under CA %s: %w",
			src.cert, leaf.Subject.String(), src.ca, err)
	}
	return nil
}

func secretValue(s *corev1.Secret, key string) ([]byte, error) {
	v, ok := s.Data[key]
	if !ok || len(v) == 0 {
		return nil, fmt.Errorf("tls: %s is missing or empty", secretRef(s, key))
	}
	return v, nil
}

func secretRef(s *corev1.Secret, key string) string {
	return fmt.Sprintf("secret %s/%s key %q", s.Namespace, s.Name, key)
}

func certPool(caPEM []byte) (*x509.CertPool, error) {
	certs := allCertificates(caPEM)
	if len(certs) == 0 {
		return nil, errors.New("no PEM CERTIFICATE block")
	}
	pool := x509.NewCertPool()
	for _, c := range certs {
		pool.AddCert(c)
	}
	return pool, nil
}

// allCertificates returns every parsable CERTIFICATE block; unparsable blocks are left to
// firstCertificate to report.
func allCertificates(data []byte) []*x509.Certificate {
	var certs []*x509.Certificate
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			return certs
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			continue
		}
		certs = append(certs, c)
	}
}

func firstCertificate(data []byte) (*x509.Certificate, error) {
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			return nil, errors.New("no PEM CERTIFICATE block")
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("parse certificate: %w", err)
		}
		return c, nil
	}
}

func checkPrivateKey(data []byte) error {
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			return errors.New("no PEM private key block")
		}
		var err error
		switch block.Type {
		case "PRIVATE KEY":
			_, err = x509.ParsePKCS8PrivateKey(block.Bytes)
		case "EC PRIVATE KEY":
			_, err = x509.ParseECPrivateKey(block.Bytes)
		case "RSA PRIVATE KEY":
			_, err = x509.ParsePKCS1PrivateKey(block.Bytes)
		default:
			continue
		}
		if err != nil {
			return fmt.Errorf("parse %s: %w", block.Type, err)
		}
		return nil
	}
}
