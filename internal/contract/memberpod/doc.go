// Package memberpod names the containers of a member pod. internal/operator/resources builds the pod with
// these names and the operator's planners and controllers read them back from pod status (the
// etcd container's readiness is the member's, a running init container is a start decision
// still pending), so they live apart from the builder: a pure planner reads them without
// importing anything that does I/O.
package memberpod
