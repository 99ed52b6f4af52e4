// Package decision is the OnDelete controller's one decision pipeline: observe a StatefulSet and
// its member pods, resolve member roles when the decision depends on them, and plan (Decide). The
// controller (internal/operator/controller/ondelete) and the plan command both call Decide, so plan
// says what the controller would do on the same state.
//
// Planning itself stays in internal/decide/rollout (pure) and role resolution in
// internal/decide/roles (pure); this package only puts them in order and selects their inputs: the
// member Leases role resolution goes by (MemberLeases), and the members' answers as role reports
// (ReportsFromClusterStatus, reports.go). I/O goes through RoleInputs, which the caller supplies;
// which objects are the members' and how to reach them is internal/operator/memberaccess's.
package decision
