// Package metricsserving configures the manager's metrics endpoint: HTTPS only, every request
// authenticated (TokenReview) and authorized (SubjectAccessReview, nonResourceURL /metrics get)
// by the API server, so the metrics are not readable by anything that reaches the pod's port.
package metricsserving
