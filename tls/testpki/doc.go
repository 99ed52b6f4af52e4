// Package testpki issues throwaway certificates for tests, the e2e suite and the demo: a CA, etcd
// member server/peer certificates and client certificates, all ECDSA P-256 in PEM, plus helpers
// that write them to disk (WriteFiles) or wrap them in cert-manager style Secrets (TLSSecret). Only
// tests and test helpers import it.
package testpki
