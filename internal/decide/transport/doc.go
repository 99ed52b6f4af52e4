// Package transport decides how an Etcd's members talk, client and peer traffic each: plain HTTP,
// TLS, or on the way from one to the other. Turning TLS on for running members cannot be one
// template change: a member that restarts listening only on https is understood by nobody yet (its
// peers dial it at the http peer URL the cluster recorded and hold no peer certificate; the
// operator, the member-agents and the clients dial http). So TLS is added in two rolling
// replacements, each quorum-safe like any rollout:
//
//  1. Adding: every member gets the TLS material. Clients are served on both schemes on the client
//     port; peers keep their http URL but now hold a peer certificate to dial https peers with. The
//     operator and the member-agents stay on http, which every member serves.
//  2. TLS: once every member runs step 1, the members restart on https only. Every member serves
//     https already, so the operator and the member-agents switch at once; a restarted member's
//     recorded peer URL is moved to https by the membership controller, and its peers can dial it
//     since step 1 gave them a certificate.
//
// Removing TLS from running members is refused: it would need the same in reverse, which is not
// built.
//
// Plan takes the spec's wish, the stages the running template renders and whether every member runs
// it, and returns the stages to render (Decision.Render), with the refusal said. The Etcd
// reconciler applies it (internal/operator/controller/etcd, transport.go),
// internal/operator/resources renders the stages and internal/operator/memberaccess dials by them.
// Pure: Plan is a function of what it is given, one named rule per answer; the tests check every
// observation, that no stage cuts a member off and that the wish is reached in at most two
// rollouts.
package transport
