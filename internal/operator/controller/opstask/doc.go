// Package opstask holds the EtcdOpsTask controller: it reads a task, its Etcd, the snapshot Lease
// of the task's kind and the namespace's other tasks, asks the planner (internal/decide/opstask)
// for the next step, carries it out (a status transition, the request annotation on the Lease, or
// the task's deletion once its TTL ran out) and records it (status, an Event, the log). The
// snapshot itself is the leading member-agent's: its backup loop answers the request on the Lease.
package opstask
