// Package reconcile holds the benchmark of one steady-state OnDelete reconcile: a real
// kube-apiserver (localcluster), real etcd members over mTLS and a warm member client pool. It counts
// the TLS handshakes a reconcile needs once the pool is warm, which must be none.
package reconcile
