// Package memberpod is the member pod's part of the contract between the operator and its member
// pods: what internal/operator/resources writes into the pod and the code in the pod reads back.
//
// It names the containers of a member pod (names.go). internal/operator/resources builds the pod
// with these names and the operator's planners and controllers read them back from pod status (the
// etcd container's readiness is the member's, a running init container is a start decision still
// pending), so they live apart from the builder: a pure planner reads them without importing
// anything that does I/O. It holds the format of member-init's --additional-peer-urls flag
// (peerurls.go), which internal/operator/resources writes and internal/member/agent reads, and the
// full snapshot schedule's default and format (schedule.go): ParseSchedule is the one parser the
// operator validates a schedule with and the backup loop runs it by.
//
// It imports only the standard library and the cron parser.
package memberpod
