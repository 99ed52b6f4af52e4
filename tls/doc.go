// Package tls turns the PEM material an etcd client needs (CA bundle, client certificate and key)
// into a verified crypto/tls configuration. The operator reads the material from cert-manager
// style Secrets, the member-agent from mounted files; both end up with a ClientMaterial.
package tls
