package plancmd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/roles"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/rollout"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/decision"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/memberaccess"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
)

// Output is what `plan` prints: the decision, and the roles it was based on.
type Output struct {
	Action rollout.Action `json:"action"`
	Pods   []string       `json:"pods"`
	// HandoverTo is where leadership moves when Action is handover.
	HandoverTo      string                  `json:"handoverTo,omitempty"`
	Rule            rollout.RuleID          `json:"rule"`
	Reason          string                  `json:"reason"`
	RoleSource      roles.Source            `json:"roleSource"`
	ConditionReason string                  `json:"conditionReason"`
	WaitingFor      []string                `json:"waitingFor,omitempty"`
	StatefulSet     string                  `json:"statefulSet"`
	UpdateRevision  string                  `json:"updateRevision"`
	Roles           map[string]rollout.Role `json:"roles,omitempty"`
	RoleMismatch    bool                    `json:"roleMismatch,omitempty"`
	RoleDetail      string                  `json:"roleDetail"`
	// Etcd is the Etcd the decision was made for; when the state holds none, EtcdDefaults says
	// which defaults stood in for it.
	Etcd         string `json:"etcd,omitempty"`
	EtcdDefaults string `json:"etcdDefaults,omitempty"`
	// MemberQueryError says why asking the members failed; roles then come from Leases.
	MemberQueryError string `json:"memberQueryError,omitempty"`
	// Controllers is the next step of every deciding controller; the fields above are the
	// rollout's, kept at the top as before.
	Controllers Controllers `json:"controllers"`
}

// MemberStatusDocument is the optional member-status document:
// {"members":[{"name":"etcd-main-0","id":"8e9e05c52164694d","leaderID":"…","reachable":true}]}.
// Beyond the roles, a member may carry clusterID, dbSize and dbSizeInUse (recovery and
// defragmentation decide on them); memberList is the member list a member answered with
// (membership decides on it: without it the member list is unknown), and heard names the voters
// the leader hears (without it, unknown).
type MemberStatusDocument struct {
	Members    []SavedMember  `json:"members"`
	MemberList []ListedMember `json:"memberList,omitempty"`
	Heard      []string       `json:"heard,omitempty"`
}

// SavedMember is one member's answer to a status request.
type SavedMember struct {
	roles.MemberReport
	ClusterID   string `json:"clusterID,omitempty"`
	DBSize      int64  `json:"dbSize,omitempty"`
	DBSizeInUse int64  `json:"dbSizeInUse,omitempty"`
	// Version and StorageVersion ("3.7.3", "3.7.0") and the downgrade as the member knows it
	// (etcdctl endpoint status): what the version decision needs.
	Version          string `json:"version,omitempty"`
	StorageVersion   string `json:"storageVersion,omitempty"`
	DowngradeEnabled bool   `json:"downgradeEnabled,omitempty"`
	DowngradeTarget  string `json:"downgradeTarget,omitempty"`
}

// ListedMember is one entry of etcd's member list; a learner that has not started has no name
// yet, only peer URLs.
type ListedMember struct {
	ID         string   `json:"id"`
	Name       string   `json:"name,omitempty"`
	PeerURLs   []string `json:"peerURLs,omitempty"`
	ClientURLs []string `json:"clientURLs,omitempty"`
	IsLearner  bool     `json:"isLearner,omitempty"`
}

// MemberStatus is a decoded member-status document: the reports the rollout resolves roles
// from, and the whole round for the other controllers.
type MemberStatus struct {
	Reports []roles.MemberReport
	Answers Answers
}

// State is what plan needs from the cluster: one StatefulSet, the Etcd owning it (nil when the
// state holds none), the pods of the namespace (or already only its own) and the Leases.
type State struct {
	Etcd        *druidv1alpha1.Etcd
	StatefulSet *appsv1.StatefulSet
	Pods        []corev1.Pod
	Leases      []coordinationv1.Lease
}

// Sources are where plan's answers come from beyond the state's objects.
type Sources struct {
	// Members answers when the rollout depends on roles and the members are to be asked (nil:
	// no member status, roles from the Leases).
	Members MemberSource
	// Leases, if not nil, reads the member Leases instead of the state's (live mode).
	Leases LeaseSource
	// Answers, if not nil, gives the membership, recovery and defragmentation controllers what
	// the members said (nil: nothing known of the members).
	Answers AnswerSource
}

// Plan runs the OnDelete controller's pipeline (decision.Decide) on st under policy, then the
// membership, recovery and defragmentation controllers' observation and planner.
func Plan(ctx context.Context, st State, src Sources, mode roles.SourcePolicy, policy rollout.Policy, now time.Time) (Output, error) {
	if src.Leases != nil {
		leases, err := src.Leases(ctx, decision.EtcdOrDefault(st.Etcd, st.StatefulSet))
		if err != nil {
			return Output{}, err
		}
		st.Leases = leases
	}
	in := roleInputs{st: st, members: src.Members}
	outcome, err := decision.Decide(ctx, decision.State{Etcd: st.Etcd, StatefulSet: st.StatefulSet, Pods: st.Pods}, in, mode, policy, now)
	if err != nil {
		return Output{}, err
	}
	out := output(st, outcome)
	if out.Controllers, err = planControllers(ctx, st, src.Answers, out, now, policy.WaitForBackupReady); err != nil {
		return Output{}, err
	}
	return out, nil
}

// MemberSource is where plan's member reports come from: a member-status file or the members.
type MemberSource func(ctx context.Context, etcd *druidv1alpha1.Etcd, targets []memberaccess.Target) ([]roles.MemberReport, error)

// LeaseSource reads member Leases live.
type LeaseSource func(ctx context.Context, etcd *druidv1alpha1.Etcd) ([]coordinationv1.Lease, error)

// Reports is a MemberSource for reports at hand, e.g. from --member-status.
func Reports(reports []roles.MemberReport) MemberSource {
	return func(context.Context, *druidv1alpha1.Etcd, []memberaccess.Target) ([]roles.MemberReport, error) {
		return reports, nil
	}
}

type roleInputs struct {
	st      State
	members MemberSource
}

// MemberLeases are the state's, which Plan has already read when live.
func (in roleInputs) MemberLeases(context.Context, *druidv1alpha1.Etcd) ([]coordinationv1.Lease, error) {
	return in.st.Leases, nil
}

func (in roleInputs) AskMembers(ctx context.Context, etcd *druidv1alpha1.Etcd, targets []memberaccess.Target) ([]roles.MemberReport, error) {
	if in.members == nil {
		return nil, nil
	}
	return in.members(ctx, etcd, targets)
}

// ServeReads asks no member: plan explains a recorded state, in which a replaced member that is
// not Ready yet counts as not participating, and a member a failed handover went to as unheard,
// as the controller decides when their reads fail.
func (in roleInputs) ServeReads(context.Context, *druidv1alpha1.Etcd, []memberaccess.Target, []string) ([]string, error) {
	return nil, nil
}

func output(st State, o decision.Outcome) Output {
	sts := st.StatefulSet
	out := Output{
		Action:          o.Decision.Action,
		Pods:            []string{},
		HandoverTo:      o.Decision.HandoverTo,
		Rule:            o.Decision.Rule,
		Reason:          o.Decision.Reason,
		RoleSource:      o.Resolution.Source,
		ConditionReason: o.Decision.Rule.CamelCase(),
		WaitingFor:      o.Decision.WaitingFor,
		StatefulSet:     sts.Namespace + "/" + sts.Name,
		UpdateRevision:  sts.Status.UpdateRevision,
		Roles:           o.Resolution.Roles,
		RoleMismatch:    o.Resolution.Mismatch,
		RoleDetail:      o.Resolution.Detail,
	}
	if len(o.Decision.Pods) > 0 {
		out.Pods = o.Decision.Pods
	}
	if st.Etcd != nil {
		out.Etcd = st.Etcd.Namespace + "/" + st.Etcd.Name
	} else {
		out.EtcdDefaults = fmt.Sprintf("no Etcd owning the StatefulSet in the state: assumed Etcd %s with client port %d; member Leases taken by their labels, without checking they are the Etcd's",
			sts.Name, resources.DefaultClientPort)
	}
	if o.MemberQueryErr != nil {
		out.MemberQueryError = o.MemberQueryErr.Error()
	}
	return out
}

// DecodeState reads a saved state; see Explain for the format.
func DecodeState(data []byte) (State, error) {
	objs, err := decodeState(data)
	if err != nil {
		return State{}, err
	}
	sts, err := objs.statefulSet()
	if err != nil {
		return State{}, err
	}
	return State{Etcd: memberaccess.OwningEtcdIn(sts, objs.etcds), StatefulSet: sts, Pods: objs.pods, Leases: objs.leases}, nil
}

type stateObjects struct {
	etcds        []druidv1alpha1.Etcd
	statefulSets []*appsv1.StatefulSet
	pods         []corev1.Pod
	leases       []coordinationv1.Lease
}

func (s stateObjects) statefulSet() (*appsv1.StatefulSet, error) {
	switch len(s.statefulSets) {
	case 1:
		return s.statefulSets[0], nil
	case 0:
		return nil, errors.New("state holds no StatefulSet")
	default:
		names := make([]string, len(s.statefulSets))
		for i, sts := range s.statefulSets {
			names[i] = sts.Name
		}
		sort.Strings(names)
		return nil, fmt.Errorf("state holds %d StatefulSets (%s), want exactly one", len(names), strings.Join(names, ", "))
	}
}

// scheme knows only the kinds plan reads; everything else is skipped as not registered.
var decoder = func() runtime.Decoder {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{appsv1.AddToScheme, corev1.AddToScheme, coordinationv1.AddToScheme, druidv1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			panic(fmt.Sprintf("building the plan scheme: %v", err))
		}
	}
	return serializer.NewCodecFactory(scheme).UniversalDeserializer()
}()

// listDocument is the part of a document that tells a List from a single object.
type listDocument struct {
	metav1.TypeMeta `json:",inline"`
	Items           []json.RawMessage `json:"items"`
}

func decodeState(state []byte) (stateObjects, error) {
	var objs stateObjects
	if len(bytes.TrimSpace(state)) == 0 {
		return objs, errors.New("state is empty")
	}
	docs := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(state), 4096)
	for n := 1; ; n++ {
		var raw json.RawMessage
		if err := docs.Decode(&raw); err != nil {
			if errors.Is(err, io.EOF) {
				return objs, nil
			}
			return objs, fmt.Errorf("decoding state document %d: %w", n, err)
		}
		if len(bytes.TrimSpace(raw)) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
			continue // an empty YAML document, e.g. after a trailing "---"
		}
		var doc listDocument
		if err := json.Unmarshal(raw, &doc); err != nil {
			return objs, fmt.Errorf("state document %d is not a Kubernetes object: %w", n, err)
		}
		items := []json.RawMessage{raw}
		if doc.Kind == "List" || strings.HasSuffix(doc.Kind, "List") {
			items = doc.Items
		}
		for i, item := range items {
			if err := objs.add(item); err != nil {
				return objs, fmt.Errorf("state document %d, item %d: %w", n, i, err)
			}
		}
	}
}

func (s *stateObjects) add(item []byte) error {
	obj, _, err := decoder.Decode(item, nil, nil)
	if err != nil {
		if runtime.IsNotRegisteredError(err) {
			return nil // a kind plan does not need, e.g. a Service someone listed too
		}
		return err
	}
	switch o := obj.(type) {
	case *appsv1.StatefulSet:
		s.statefulSets = append(s.statefulSets, o)
	case *corev1.Pod:
		s.pods = append(s.pods, *o)
	case *coordinationv1.Lease:
		s.leases = append(s.leases, *o)
	case *druidv1alpha1.Etcd:
		s.etcds = append(s.etcds, *o)
	}
	// Other registered kinds (ConfigMaps, Services, …) carry nothing for the plan.
	return nil
}

// DecodeMemberStatus reads the member-status document; empty input means no member status.
// Unknown fields are errors, so a misspelt "leaderID" does not silently drop the leader.
func DecodeMemberStatus(data []byte) (MemberStatus, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return MemberStatus{}, nil
	}
	var doc MemberStatusDocument
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		return MemberStatus{}, fmt.Errorf("decoding member status: %w", err)
	}
	reports := make([]roles.MemberReport, len(doc.Members))
	for i, m := range doc.Members {
		if m.Name == "" {
			return MemberStatus{}, fmt.Errorf("member status entry %d has no name", i)
		}
		reports[i] = m.MemberReport
	}
	if doc.Members == nil {
		reports = nil
	}
	answers, err := doc.answers()
	if err != nil {
		return MemberStatus{}, err
	}
	return MemberStatus{Reports: reports, Answers: answers}, nil
}

// answers turns the document into the round the controllers ask for, as etcdclient returns it.
func (doc MemberStatusDocument) answers() (Answers, error) {
	cs := memberaccess.ClusterStatus{}
	for i, m := range doc.Members {
		status := memberaccess.MemberStatus{Name: m.Name, Reachable: m.Reachable, RaftAppliedIndex: m.AppliedIndex,
			IsLearner: m.IsLearner, DBSize: m.DBSize, DBSizeInUse: m.DBSizeInUse,
			Version: m.Version, StorageVersion: m.StorageVersion, DowngradeEnabled: m.DowngradeEnabled, DowngradeTarget: m.DowngradeTarget}
		for _, id := range []struct {
			field, hex string
			into       *uint64
		}{{"id", m.ID, &status.ID}, {"leaderID", m.LeaderID, &status.LeaderID}, {"clusterID", m.ClusterID, &status.ClusterID}} {
			var err error
			if *id.into, err = parseHexID(id.hex); err != nil {
				return Answers{}, fmt.Errorf("member status entry %d (%s): %s: %w", i, m.Name, id.field, err)
			}
		}
		cs.Members = append(cs.Members, status)
	}
	byName := map[string]uint64{}
	if doc.MemberList != nil {
		// Present, even empty: the member list was answered.
		cs.MemberList = []memberaccess.EtcdMember{}
	}
	for i, m := range doc.MemberList {
		id, err := parseHexID(m.ID)
		if err != nil || id == 0 {
			return Answers{}, fmt.Errorf("member list entry %d: id %q is not a member ID in hex", i, m.ID)
		}
		cs.MemberList = append(cs.MemberList, memberaccess.EtcdMember{ID: id, Name: m.Name, PeerURLs: m.PeerURLs, ClientURLs: m.ClientURLs, IsLearner: m.IsLearner})
		if m.Name != "" {
			byName[m.Name] = id
		}
	}
	answers := Answers{Asked: true, Status: &cs}
	if doc.Heard != nil {
		heard := map[uint64]bool{}
		for _, name := range doc.Heard {
			id, ok := byName[name]
			if !ok {
				return Answers{}, fmt.Errorf("heard names %s, which the member list does not", name)
			}
			heard[id] = true
		}
		answers.Heard = func(context.Context) map[uint64]bool { return heard }
	}
	return answers, nil
}

// parseHexID reads a member or cluster ID as etcd prints it; "" and "0" are no ID.
func parseHexID(hex string) (uint64, error) {
	if hex == "" {
		return 0, nil
	}
	id, err := strconv.ParseUint(hex, 16, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not an ID in hex", hex)
	}
	return id, nil
}
