// Package agent is the sidecar in every etcd member pod. It asks its own member for its
// status over mutual TLS and, while the member answers, renews the member's Lease with the
// member ID, cluster ID and role. The Lease going stale is the signal that the member is gone;
// the agent never creates a Lease and never touches another pod's.
package agent
