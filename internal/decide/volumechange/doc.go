// Package volumechange decides how an Etcd's members move to the volumes its spec asks for when
// spec.storageClass or spec.storageCapacity changes. A StatefulSet's volume claim templates cannot
// change, so the StatefulSet is deleted without its pods (orphaned) and created again with a claim
// template of a new name: the pods, now outdated, are replaced one at a time by the rollout, the
// leader last, and each comes back on a new, empty claim and joins the others as a learner that is
// promoted once it caught up. The old claims, and the data on them, are left where they are.
//
// That is only safe while the other members hold the data and a quorum: the change waits until
// every member is ready, and is refused for fewer than three members (the one member replaced would
// be the only one, and would start empty: a backup and restore is the way there). Before the
// StatefulSet is created again, leadership goes to the highest ordinal, so the members move in
// ordinal order, which the StatefulSet controller needs (see RuleLeaderLast).
//
// The claim template's name is what binds pods to volumes, so it is never guessed: a StatefulSet
// that is missing while member pods still run (deleted in the middle of a change, or by someone
// else) is created with the claim template the pods mount.
//
// A growth of the capacity within a storage class that allows volume expansion is made in place
// instead (expand.go): every claim's request is raised to the new size and the StatefulSet is
// created again, its pods kept, with the same claim template name and the new size. No member
// moves, restarts or loses its data: the volume grows under it, online.
//
// Once the change is made, Plan follows it to its end while the VolumeChange condition says it is
// in flight (settle.go): the members on the new claims and ready, or every claim grown; then it
// names the old claims kept with their data.
//
// Plan returns the claim template to render, whether to create the StatefulSet again, the claims to
// grow and, once done, the old claims kept; the Etcd reconciler (internal/operator/controller/etcd,
// volume.go) carries it out. Pure: Plan is a function of what it is given, one named rule per
// answer, property-tested.
package volumechange
