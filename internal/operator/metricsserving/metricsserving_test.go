package metricsserving

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestOptions(t *testing.T) {
	withPair := t.TempDir()
	for _, name := range []string{CertName, KeyName} {
		if err := os.WriteFile(filepath.Join(withPair, name), []byte("pem"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	keyOnly := t.TempDir()
	if err := os.WriteFile(filepath.Join(keyOnly, KeyName), []byte("pem"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, certDir, wantErr string
	}{
		{name: "self-signed"},
		{name: "certificate directory", certDir: withPair},
		// controller-runtime would quietly serve a self-signed certificate instead.
		{name: "directory without the certificate", certDir: keyOnly, wantErr: "has no tls.crt"},
		{name: "directory that does not exist", certDir: filepath.Join(withPair, "missing"), wantErr: "has no tls.crt"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := Options(":8443", tt.certDir)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !o.SecureServing || o.FilterProvider == nil {
				t.Errorf("metrics served without TLS or without authentication: %+v", o)
			}
			if o.CertDir != tt.certDir {
				t.Errorf("CertDir %q, want %q", o.CertDir, tt.certDir)
			}
		})
	}
}
