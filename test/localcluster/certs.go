package localcluster

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// certValidity outlives any test run or demo session by far; the CA is
// thrown away with the work dir.
const certValidity = 7 * 24 * time.Hour

// keyPair is a certificate with its key, both PEM-encoded.
type keyPair struct {
	certPEM []byte
	keyPEM  []byte
	cert    *x509.Certificate
	key     crypto.Signer
}

// certificateAuthority signs the apiserver serving cert and the client certs;
// the apiserver trusts it as --client-ca-file.
type certificateAuthority struct {
	keyPair
}

func newCA(commonName string) (*certificateAuthority, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate CA key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          randomSerial(),
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(certValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("self-sign CA: %w", err)
	}
	return newKeyPair(der, key)
}

// certRequest is what varies between the certificates the cluster needs.
type certRequest struct {
	commonName    string
	organizations []string
	dnsNames      []string
	ips           []net.IP
	server        bool
}

func (ca *certificateAuthority) issue(req certRequest) (*keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate key for %s: %w", req.commonName, err)
	}
	usage := x509.ExtKeyUsageClientAuth
	if req.server {
		usage = x509.ExtKeyUsageServerAuth
	}
	tmpl := &x509.Certificate{
		SerialNumber: randomSerial(),
		Subject:      pkix.Name{CommonName: req.commonName, Organization: req.organizations},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(certValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		DNSNames:     req.dnsNames,
		IPAddresses:  req.ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, key.Public(), ca.key)
	if err != nil {
		return nil, fmt.Errorf("sign certificate for %s: %w", req.commonName, err)
	}
	kp, err := newKeyPair(der, key)
	if err != nil {
		return nil, err
	}
	return &kp.keyPair, nil
}

func newKeyPair(der []byte, key *ecdsa.PrivateKey) (*certificateAuthority, error) {
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parse generated certificate: %w", err)
	}
	keyPEM, err := encodePrivateKey(key)
	if err != nil {
		return nil, err
	}
	return &certificateAuthority{keyPair{
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM:  keyPEM,
		cert:    cert,
		key:     key,
	}}, nil
}

// newServiceAccountKey returns the PEM private key that signs service account
// tokens; the apiserver derives the verification key from the same file.
func newServiceAccountKey() ([]byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate service account key: %w", err)
	}
	return encodePrivateKey(key)
}

// encodePrivateKey uses SEC 1 ("EC PRIVATE KEY"): kube-apiserver's
// --service-account-key-file reads public keys out of that form but not out
// of PKCS #8.
func encodePrivateKey(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encode private key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}

func randomSerial() *big.Int {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		// crypto/rand does not fail on Linux; a fixed serial would still work.
		return big.NewInt(time.Now().UnixNano())
	}
	return serial
}

// write stores the pair as <dir>/<name>.crt and <dir>/<name>.key.
func (kp *keyPair) write(dir, name string) (certFile, keyFile string, err error) {
	certFile = filepath.Join(dir, name+".crt")
	keyFile = filepath.Join(dir, name+".key")
	if err := os.WriteFile(certFile, kp.certPEM, 0o644); err != nil {
		return "", "", fmt.Errorf("write %s: %w", certFile, err)
	}
	if err := os.WriteFile(keyFile, kp.keyPEM, 0o600); err != nil {
		return "", "", fmt.Errorf("write %s: %w", keyFile, err)
	}
	return certFile, keyFile, nil
}
