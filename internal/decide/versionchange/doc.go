// Package versionchange decides how an Etcd's members move from the etcd version they run to the
// one spec.etcd.image names, and above all how they move down.
//
// An upgrade is a rolling replacement: a newer member joins a cluster of older ones and the cluster
// version rises once the last one runs it. A downgrade cannot be done that way: an older binary
// refuses the data a newer cluster wrote ("version 3.7.0 is not supported") and crash-loops, so the
// rollout would stall one member short. etcd (3.6 and later) downgrades through its own API:
// validate the target, enable the downgrade (the cluster version drops to the target and every
// member rewrites its storage version to it), replace the members one by one with the older binary,
// and etcd ends the downgrade by itself once every member runs it. Until the members' storage is at
// the target, the StatefulSet keeps the image that runs: rendering the older image earlier would
// only break the first member replaced.
//
// A member replaced onto the target image that fails to start (its image cannot be pulled, it
// crash-loops, it never becomes Ready) stops the downgrade: the operator cancels it and renders the
// image that ran before (recorded on the StatefulSet when the target was first rendered), so the
// rollout replaces the failed member back, and it records the target as failed so that the same
// image is not tried again until the spec asks for another one. A failed member is down already:
// rolling forward replaces only it and the members already moved, one at a time, where going on
// would take a second member down with the first still out.
//
// What etcd cannot do is refused (the Etcd's lastErrors and an Event, nothing rendered or deleted):
// a downgrade by more than one minor version, an upgrade skipping one, and a downgrade started
// while the members do not all run the version the StatefulSet does (an upgrade still under way). A
// version that cannot be read from an image (a digest, a tag that is no etcd version, another
// major) is not judged: the image is rendered as the spec says, and the reason says so.
//
// Plan takes the spec's and the template's image versions and the members' server and storage
// versions and downgrade state, and returns the etcd image to render (the spec's, or the running
// one while a downgrade is prepared) and the downgrade call to make (enable, cancel). Pure: one
// named rule per answer, property-tested; the Etcd reconciler (internal/operator/controller/etcd,
// version.go) asks the members and carries out the downgrade API calls the decision names. The
// user's side is docs/rollouts.md, "Downgrading etcd".
package versionchange
