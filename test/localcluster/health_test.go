package localcluster

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// A certificate file kube-controller-manager has not finished writing must read as "not healthy
// yet", never as an error: the start-up poll treats an error as fatal (CI once failed on an empty
// file seen mid-write).
func TestControllerManagerHealthyWhileCertificateIsWritten(t *testing.T) {
	for _, tc := range []struct {
		name    string
		content string
		write   bool
	}{
		{name: "not written yet", write: false},
		{name: "empty", content: "", write: true},
		{name: "cut short", content: "-----BEGIN CERTIFICATE-----\nMIIB", write: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.write {
				if err := os.WriteFile(filepath.Join(dir, "kube-controller-manager.crt"), []byte(tc.content), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			healthy, err := ControllerManagerHealthy(context.Background(), dir, "https://127.0.0.1:1/healthz")
			if err != nil || healthy {
				t.Fatalf("ControllerManagerHealthy = %v, %v; want false, nil", healthy, err)
			}
		})
	}
}
