// Command etcd-conductor is the one binary of the project, the operator's image's entry point. Its
// first argument picks the role:
//
//	etcd-conductor manager --config FILE      the operator
//	etcd-conductor member-agent [flags]       the member pod's sidecar: renews its member's Lease,
//	                                          takes backups on the leader
//	etcd-conductor member-agent init [flags]  the member pod's init step: decides how the member
//	                                          starts, restores or seeds its data dir
//	etcd-conductor plan -f STATE [flags]      explain what each deciding controller would do next
//	etcd-conductor version                    the release, commit and Go version of this binary
//
// Each role is a thin layer of flags and wiring over the packages that do the work: manager.go over
// internal/operator, memberagent.go, memberagent_backup.go and memberinit_restore.go over
// internal/member, plan.go over internal/operator/plancmd. The golden files in testdata/plan pin
// what plan prints (regenerated with go test ./cmd/etcd-conductor -update).
package main
