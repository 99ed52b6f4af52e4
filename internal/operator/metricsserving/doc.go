// Package metricsserving configures the manager's metrics endpoint: HTTPS only, every request
// authenticated (TokenReview) and authorized (SubjectAccessReview, nonResourceURL /metrics get) by
// the API server, so the metrics are not readable by anything that reaches the pod's port. Options
// takes the certificate from a directory in cert-manager's Secret layout, re-read when it changes
// (a directory lacking a file is an error, never a silent self-signed certificate), and keeps
// HTTP/2 off.
package metricsserving
