package memberlease

import (
	"encoding/json"
	"strconv"
	"strings"
)

// What the member's init step (`member-agent init`) writes on its member Lease after every start
// decision, in one merge patch.
const (
	// AnnotationStartDecision holds the init step's last decision, "<rule>: <reason>"
	// (FormatStartDecision), for people and for the operator's Events.
	AnnotationStartDecision = "etcd-conductor.io/start-decision"
	// AnnotationDataLostMemberID names (hex) the member ID whose data the pod no longer has; the
	// operator replaces exactly that member. The init step removes it with any other decision.
	AnnotationDataLostMemberID = "etcd-conductor.io/data-lost-member-id"
	// AnnotationStartReport is the init step's evidence for the operator, a StartReport in JSON:
	// which pod incarnation decided what on which data. The operator counts a recorded voter as
	// without data only on a report of its current pod.
	AnnotationStartReport = "etcd-conductor.io/start-report"
	// AnnotationRestore is where operators before the restore order moved to the Etcd's status
	// kept it. A Lease is writable by the member pods and by namespace users, so nothing acts on
	// it any more: the operator reports one it finds as a forgery and removes it.
	AnnotationRestore = "etcd-conductor.io/restore-from-backup"
)

// StartRuleBootstrapFromBackup is the start rule (StartReport.Rule) of a member of a new
// cluster whose backup store already holds a backup: it does not bootstrap empty but waits for
// the operator, which orders one member to restore that backup once every member proved an
// empty data dir this way. Shared here because the operator reads it (it imports no sidecar
// code).
const StartRuleBootstrapFromBackup = "wait/bootstrap-from-backup"

// DataState is what the init step found in the member's data dir. The values are
// internal/member/datadir's verdicts, spelled the same so a report reads like the init step's log.
type DataState string

const (
	// DataEmpty: no data dir, or one without a member directory.
	DataEmpty DataState = "Empty"
	// DataValid: etcd would start from it: the WAL reads with etcd's wal package and the
	// backend opens with bbolt.
	DataValid DataState = "Valid"
	// DataCorrupt: etcd's or bbolt's checks refuse it.
	DataCorrupt DataState = "Corrupt"
)

// StartReport is the init step's evidence on its Lease (AnnotationStartReport).
type StartReport struct {
	// PodUID is the pod incarnation that decided.
	PodUID string `json:"podUID"`
	// Rule is the start rule decided; Data what was found in the data dir when deciding.
	Rule string    `json:"rule"`
	Data DataState `json:"data"`
	// Seeded: a joining learner's data dir was seeded from the backup store's latest full
	// snapshot (internal/decide/seeding). The operator promotes it only once its keyspace equals the
	// leader's: the bucket is no authority on the cluster's data.
	Seeded bool `json:"seeded,omitempty"`
	// NoSpace is set when a restore failed because the data dir's volume is too small for it:
	// the operator shows it (RecoveryInProgress, an Event), since no retry helps until the
	// volume grows. Only reported, never acted on.
	NoSpace *SpaceShortage `json:"noSpace,omitempty"`
}

// SpaceShortage is a restore's need against its volume's free space, in bytes.
type SpaceShortage struct {
	// Dir is where the free space was measured (the data dir or its nearest existing ancestor).
	Dir  string `json:"dir"`
	Need int64  `json:"need"`
	Free int64  `json:"free"`
}

// Annotation is the report as AnnotationStartReport's value.
func (r StartReport) Annotation() string { return jsonValue(r) }

// ParseStartReport reads AnnotationStartReport; ok is false when there is none, it is
// unreadable, or it is not exactly as Annotation writes it. Only that one canonical form counts
// (the pod UID first, no other spelling, no duplicate key, no field of another version): the
// chart's member report policy admits a report from a member pod only when it opens with that
// pod's own UID, so what is read here must be what the policy saw.
func ParseStartReport(annotations map[string]string) (StartReport, bool) {
	var r StartReport
	raw := annotations[AnnotationStartReport]
	if raw == "" || json.Unmarshal([]byte(raw), &r) != nil || r.PodUID == "" || r.Annotation() != raw {
		return StartReport{}, false
	}
	return r, true
}

// FormatStartDecision is AnnotationStartDecision's value: the rule id first, so a reader can
// match on the prefix.
func FormatStartDecision(rule, reason string) string { return rule + ": " + reason }

// FormatDataLostMemberID is AnnotationDataLostMemberID's value: the member ID in lower-case hex,
// as the holderIdentity spells it.
func FormatDataLostMemberID(memberID uint64) string { return strconv.FormatUint(memberID, 16) }

// RestoreResultPrefix starts the part of a start decision's reason that says what a restore
// rebuilt (the snapshot, the deltas, how the result was checked, what it fell back from, which
// revisions it did not reach): the recovery controller repeats it when it records the restored
// cluster, so the Etcd's condition and Events carry it.
const RestoreResultPrefix = "restored: "

// RestoreStoppedEarlyPrefix starts the part of a restore result that says the replay ended
// before the chain's last revision, and why (internal/member/restore writes it).
const RestoreStoppedEarlyPrefix = "stopped early: "

// RestoreStoppedEarly is why a restore result ended early ("" when it reached the chain's end).
func RestoreStoppedEarly(result string) string {
	if i := strings.Index(result, RestoreStoppedEarlyPrefix); i >= 0 {
		return result[i+len(RestoreStoppedEarlyPrefix):]
	}
	return ""
}

// RestoreResult is that part of a start decision ("" when it has none).
func RestoreResult(decision string) string {
	if i := strings.Index(decision, RestoreResultPrefix); i >= 0 {
		return decision[i:]
	}
	return ""
}
