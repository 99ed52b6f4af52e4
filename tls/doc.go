// Package tls turns the PEM material an etcd client needs (CA bundle, client certificate and key)
// into a verified crypto/tls configuration. The operator reads the material from cert-manager style
// Secrets (FromSecrets), the member-agent and the manager's operator-wide key pair from mounted
// files (LoadFiles); both end up with a ClientMaterial, which the member client (etcdclient) dials
// with.
package tls
