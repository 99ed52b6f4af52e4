// Package rollout decides, from one observation of an etcd StatefulSet and its pods, which pod (or
// batch of followers, within the quorum's headroom) the OnDelete controller deletes next so that a pod-template change reaches every
// member without losing quorum needlessly (design DEP-07). It does no I/O, reads no clock and logs
// nothing: Plan is a pure function of Observed, so the controller, the `plan` subcommand and the
// tests all see the same decision for the same state.
//
// Observe turns the StatefulSet and its pods into an Observed (observe.go, with the With methods
// that add what the members said); plan.go holds the ordered rule list, rules.go the rules up to
// DEP-07 step 3 and participating.go step 4 with the quorum's headroom, the catch-up bound and the
// handover; classify.go and rank.go are the container classes and the order of non-participating
// pods. Every rule is described below.
//
// # Rules
//
// Plan runs an ordered list of small named rules; the first rule that does not pass decides. Each
// id below is qualified by the planner, "rollout/" (Planner) first: "rollout/done". In order:
//
//   - refuse/out-of-bounds: replicas, the number of pods or a pod's ordinal exceeds MaxMembers (the
//     Etcd API's bound on spec.replicas). Such input is corrupt or hostile: nothing is deleted, and
//     nothing is sized by it.
//   - wait/no-update-revision: the StatefulSet has no status.updateRevision yet, so "outdated"
//     cannot be judged.
//   - done: every pod carries the update revision and none is terminating or missing.
//   - wait/operation-in-flight/<kind>: another operation is in flight on the Etcd (a scale, a
//     recovery, a defragmentation, the hand-over to RollingUpdate; package operation): nothing is
//     deleted, not even a non-participating pod, until its condition clears. The controller asks
//     this rule again on the Etcd read afresh right before a deletion (HeldByOperation).
//   - wait/backup-not-ready (Observed.Backup, package backupgate; DEP-01 postpones rolling updates
//     while BackupReady is False): no participating member is deleted and no leadership moved while
//     the Etcd's BackupReady is False and controllers.etcd.waitForBackupReady is on. An outdated
//     pod that does not participate passes (the next rules replace it at no cost to the quorum).
//     Asked again with HeldByOperation before each deletion.
//   - single-node: replicas is 1 and the only pod is outdated: delete it, whatever its health.
//   - non-participating/{dead,transient,unknown,alive-unready} (DEP-07 step 2): an outdated pod
//     whose etcd container is not Ready contributes nothing to quorum, so it is deleted without
//     waiting for anything else. Among them a Dead container goes first, then Transient, then
//     Unknown, then Alive-but-unready (a live process rejoins as soon as quorum returns, so it is
//     kept longest). Ties go to the lowest ordinal.
//   - wait/new-volume-no-quorum: not so during a volume change for a pod whose replacement comes
//     back on a new, empty claim (PodState.NewVolume) while the participating voters are no quorum.
//     Its member may be what brings the quorum back (killed or cut off for a moment, its data
//     intact); deleted, its data would be out of the cluster's reach, and then the next member's,
//     once that one stops participating for want of a quorum, until none holds any.
//   - wait/pod-terminating, wait/pod-missing, wait/updated-not-participating, wait/scale-down
//     (DEP-07 step 3): before a participating member is touched, every pod must exist, none may be
//     on its way out, every updated pod must be participating again and no pod outside the ordinal
//     range (a scale-down in flight) may remain.
//   - wait/quorum-headroom: a participating member goes only while the voters already unavailable
//     (missing, terminating, not participating, learners) leave room under the quorum's headroom,
//     voters − (voters/2+1); a cluster of two voters has none.
//   - wait/catch-up (Policy.CatchUp): every voter that would remain must be within
//     Policy.MaxAppliedIndexLag raft entries of the leader's applied index (etcd Status); the
//     reason names who lags by how much. A follower that would remain without an applied index (it
//     did not answer Status) is waited for too. Without the leader's index the highest a
//     participating voter reported is the reference (a lower bound of the leader's); unchecked, and
//     said so, only when no member reported one (roles from leases).
//   - wait/handover-target-unheard: a member a failed handover went to (AnnotationHandoverFailedTo
//     on a pod still there) may be cut off from the leader while its readiness probe has not failed
//     yet. The controller asks it for a linearizable read (HandoverSuspects); until it serves one
//     (Observed.WithUnheard marks it Unheard), no participating member is deleted, and the reason
//     counts the voters known to be heard against the quorum. A handover still goes on, never to an
//     Unheard member: it takes no member out, and another member taking over absorbs the raised
//     term the failed transferee's campaign left.
//   - participating/{follower,unknown-role} (DEP-07 step 4): delete a participating outdated pod, a
//     known follower first (one lagging beyond the catch-up bound before the others), then a pod
//     whose role is unknown. Ties go to the lowest ordinal. With Policy.MaxConcurrent > 1 several
//     known followers go at once, as many as the headroom leaves (5 voters: 2, 7 voters: 3), and
//     the step 3 waits hold only once it is used up, so a partial batch (one member back, one
//     stalled) is simply the next observation.
//   - the leader last, alone: handover/move-leader (Policy.Handover) moves leadership to the
//     updated, participating, answering voter (never a learner) with the highest applied index; its
//     pod is deleted by a later decision, once it follows (participating/follower). Without a
//     handover: participating/leader (handover off), participating/leader-no-transferee (no updated
//     voter answered, or the leader did not), participating/leader-handover-failed
//     (Policy.HandoverAttempts failures recorded on the pod, AnnotationHandoverFailures); etcd's
//     own shutdown handover then applies. A retry goes to another transferee than the ones that
//     failed (AnnotationHandoverFailedTo) while one qualifies: a member cut off from the leader
//     fails every attempt.
//
// Terminating pods are never chosen; a decision names more than one pod only for a batch of
// followers.
//
// # Container classes
//
// ClassifyContainer reads the etcd container's status. DEP-07 names the clear cases; the rest is
// decided here:
//
//   - Dead: state.terminated is set, or state.waiting has a reason that will not fix itself without
//     a new pod: CrashLoopBackOff, RunContainerError, ImagePullBackOff, ErrImagePull,
//     CreateContainerConfigError (DEP-07) and also InvalidImageName, ErrImageNeverPull,
//     CreateContainerError, PreStartHookError, PostStartHookError. A pod in phase Failed or
//     Succeeded without an etcd container status is Dead too (it will never run again).
//   - Transient: state.waiting with ContainerCreating or PodInitializing (DEP-07), and also any
//     other or empty waiting reason, a container status with no state at all (the API treats that
//     as waiting), and a pod without an etcd container status in phase Pending or with no phase
//     (just created, being scheduled, init containers running).
//   - Alive: state.running is set, regardless of readiness.
//   - Unknown: no etcd container status although the pod claims phase Running or Unknown (for
//     example a template without a container named "etcd", or a node that stopped reporting).
//
// The classes only rank non-participating pods; a Ready etcd container is participating whatever
// its class.
//
// # Participation ahead of readiness
//
// DEP-07 calls a pod participating when its readiness probe passes, and that probe is a
// linearizable read. The kubelet runs it once a readiness period, so a replaced member is in the
// quorum up to a period before its pod says so, and every step of a rollout waits that long. With
// Policy.RejoinByRead the controller asks the pods AwaitingRejoin lists (updated, in range, not
// terminating, no learner, etcd container running but not Ready, while outdated pods remain) to
// serve it that same read over mTLS, and WithRejoinProven counts those that did as participating
// (PodState.RejoinProven; the decision's reason names them). It only ever adds: outdated pods keep
// their readiness (DEP-07 step 2 ranks them by it), and a pod the kubelet calls Ready is never
// taken for less.
//
// # Ordinals
//
// Observe takes a pod's ordinal from the apps.kubernetes.io/pod-index label, falling back to the
// suffix of its name after "<statefulset>-"; a pod with neither gets -1. Pods whose ordinal lies
// outside [0, replicas) are about to be removed by the StatefulSet controller's scale-down: the
// planner never deletes them and holds participating updates until they are gone.
package rollout
