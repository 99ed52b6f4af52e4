package localcluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"

	"github.com/etcd-conductor/etcd-conductor/tls/testpki"
)

// The cluster's CA and certificates come from testpki; what is particular to a control plane is
// which usages and groups each certificate carries.
var (
	serverUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	clientUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
)

// newServiceAccountKey returns the PEM private key that signs service account
// tokens; the apiserver derives the verification key from the same file.
func newServiceAccountKey() ([]byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate service account key: %w", err)
	}
	// SEC 1 ("EC PRIVATE KEY"): kube-apiserver's --service-account-key-file reads public keys
	// out of that form but not out of PKCS #8.
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encode service account key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}

// writeKeyPair stores the pair as <dir>/<name>.crt and <dir>/<name>.key.
func writeKeyPair(kp testpki.KeyPair, dir, name string) (certFile, keyFile string, err error) {
	certFile = filepath.Join(dir, name+".crt")
	keyFile = filepath.Join(dir, name+".key")
	if err := os.WriteFile(certFile, kp.CertPEM, 0o644); err != nil {
		return "", "", fmt.Errorf("write %s: %w", certFile, err)
	}
	if err := os.WriteFile(keyFile, kp.KeyPEM, 0o600); err != nil {
		return "", "", fmt.Errorf("write %s: %w", keyFile, err)
	}
	return certFile, keyFile, nil
}
