// Package memberhealth decides DEP-01's operator scenario 9: a quorate cluster with a minority of
// members NotReady for longer than notReadyThreshold has their pods deleted, one per pass, so they
// restart (a restarted member re-joins as itself, or the membership controller replaces it once its
// data is reported lost). Plan is pure (no I/O, no clock): the membership controller
// (internal/operator/controller/membership) observes, asks Plan once its own membership plan is
// settled, and deletes at most the one pod named.
//
// Safety, in the words of the project's rule: no pod is deleted when that would leave fewer than a
// quorum of healthy voters, healthy as the leader sees it. A member the leader hears (Heard: it
// leads, or it served a linearizable read) participates: its pod is deleted only if the other heard
// voters still form a quorum of the voters. A member the leader does not hear (or that is no voter)
// adds nothing to the quorum: its pod may be deleted while the heard voters form one. Nothing is
// deleted while another operation is in flight (package operation: a rollout, a scaling, a
// recovery, a defragmentation, a strategy hold), while quorum is lost (recovery's) or while
// NotReady members are not a minority (DEP-01 scenario 10), nor before the controller has asked
// which voters the leader hears. Every rule has a stable id, every reason its numbers.
//
// The rules are in plan.go in the order they are asked; table cases and the properties every plan
// keeps (TestPlanProperties) are in plan_test.go.
package memberhealth
