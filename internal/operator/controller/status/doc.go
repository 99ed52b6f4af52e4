// Package status holds the status controller: it computes an Etcd's members, conditions and
// replica counts from its StatefulSet, pods and member Leases, and writes them through
// etcdstatus.Patch as WriterStatus, like every other writer of the status.
package status
