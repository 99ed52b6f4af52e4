package metricsserving

import (
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// The filter asks the API server about every scraper's token and its right to GET /metrics.
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// Certificate and key file names in the certificate directory (cert-manager's Secret layout).
const (
	CertName = "tls.crt"
	KeyName  = "tls.key"
)

// Options returns the metrics server options for bindAddress ("0" disables serving). certDir
// holds tls.crt and tls.key, re-read when they change; empty means a self-signed certificate made
// at start-up. A certDir that lacks either file is an error: controller-runtime would otherwise
// fall back to a self-signed certificate without a word, and scrapers verifying against the
// configured CA would fail for no visible reason.
func Options(bindAddress, certDir string) (metricsserver.Options, error) {
	o := metricsserver.Options{
		BindAddress:    bindAddress,
		SecureServing:  true,
		FilterProvider: filters.WithAuthenticationAndAuthorization,
		// HTTP/2 stays off: its stream-reset and continuation floods (CVE-2023-44487,
		// CVE-2023-45288) need no credentials, and a scraper gains nothing from it.
		TLSOpts: []func(*tls.Config){func(c *tls.Config) {
			c.NextProtos = []string{"http/1.1"}
			c.MinVersion = tls.VersionTLS12
		}},
	}
	if certDir == "" {
		return o, nil
	}
	for _, name := range []string{CertName, KeyName} {
		path := filepath.Join(certDir, name)
		if _, err := os.Stat(path); err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return metricsserver.Options{}, fmt.Errorf("metricsCertDir %s has no %s", certDir, name)
			}
			return metricsserver.Options{}, fmt.Errorf("metricsCertDir: %w", err)
		}
	}
	o.CertDir, o.CertName, o.KeyName = certDir, CertName, KeyName
	return o, nil
}
