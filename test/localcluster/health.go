package localcluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// ControllerManagerHealthy asks kube-controller-manager's /healthz at url, trusting exactly the
// certificate it generated for itself in certDir (kube-controller-manager.crt holds the serving
// certificate and the CA that signed it, with 127.0.0.1 among its names). Until it has written
// that file it is not healthy yet; a file it is still writing (empty or cut short, seen on a loaded
// CI machine) is read as not written yet, so the caller's poll goes on rather than failing.
func ControllerManagerHealthy(ctx context.Context, certDir, url string) (bool, error) {
	pem, err := os.ReadFile(filepath.Join(certDir, "kube-controller-manager.crt"))
	if err != nil {
		return false, nil
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		return false, nil
	}
	client := &http.Client{
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}},
		Timeout:   5 * time.Second,
	}
	defer client.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return false, nil
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode == http.StatusOK && string(body) == "ok", nil
}
