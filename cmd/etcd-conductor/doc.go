// Command etcd-conductor is the one binary of the project. Its first argument picks the role:
//
//	etcd-conductor manager --config FILE      the operator
//	etcd-conductor member-agent [flags]       the sidecar that renews its member's Lease
//	etcd-conductor plan -f STATE [flags]      explain what each deciding controller would do next
//	etcd-conductor version                    the release, commit and Go version of this binary
package main
