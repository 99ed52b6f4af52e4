// Package plancmd backs the `etcd-conductor plan` command: it reads a cluster state, saved or
// live, runs the controller's own decision pipeline (internal/decision) on it and reports the
// decision together with the role resolution behind it. Decoding is pure; ReadLive and the
// member questions do I/O only through the clients the caller passes in.
package plancmd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/etcd-conductor/etcd-conductor/etcdclient"
	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/decision"
	"github.com/etcd-conductor/etcd-conductor/internal/memberaccess"
	"github.com/etcd-conductor/etcd-conductor/internal/resources"
	"github.com/etcd-conductor/etcd-conductor/internal/roles"
	"github.com/etcd-conductor/etcd-conductor/internal/rollout"
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
}

// MemberStatusDocument is the optional member-status document:
// {"members":[{"name":"etcd-main-0","id":"8e9e05c52164694d","leaderID":"…","reachable":true}]}.
type MemberStatusDocument struct {
	Members []roles.MemberReport `json:"members"`
}

// State is what plan needs from the cluster: one StatefulSet, the Etcd owning it (nil when the
// state holds none), the pods of the namespace (or already only its own) and the Leases.
type State struct {
	Etcd        *druidv1alpha1.Etcd
	StatefulSet *appsv1.StatefulSet
	Pods        []corev1.Pod
	Leases      []coordinationv1.Lease
}

// Plan runs the controller's pipeline (decision.Decide) on st under policy. members answers
// when the decision depends on roles and the members are to be asked (nil: no member status,
// roles from the Leases); leases, if not nil, reads the member Leases instead of st.Leases (live
// mode).
func Plan(ctx context.Context, st State, members MemberSource, leases LeaseSource, mode roles.SourcePolicy, policy rollout.Policy, now time.Time) (Output, error) {
	in := roleInputs{st: st, members: members, leases: leases}
	outcome, err := decision.Decide(ctx, decision.State{Etcd: st.Etcd, StatefulSet: st.StatefulSet, Pods: st.Pods}, in, mode, policy, now)
	if err != nil {
		return Output{}, err
	}
	return output(st, outcome), nil
}

// MemberSource is where plan's member reports come from: a member-status file or the members.
type MemberSource func(ctx context.Context, etcd *druidv1alpha1.Etcd, targets []etcdclient.Target) ([]roles.MemberReport, error)

// LeaseSource reads member Leases live.
type LeaseSource func(ctx context.Context, etcd *druidv1alpha1.Etcd) ([]coordinationv1.Lease, error)

// Reports is a MemberSource for reports at hand, e.g. from --member-status.
func Reports(reports []roles.MemberReport) MemberSource {
	return func(context.Context, *druidv1alpha1.Etcd, []etcdclient.Target) ([]roles.MemberReport, error) {
		return reports, nil
	}
}

type roleInputs struct {
	st      State
	members MemberSource
	leases  LeaseSource
}

func (in roleInputs) MemberLeases(ctx context.Context, etcd *druidv1alpha1.Etcd) ([]coordinationv1.Lease, error) {
	if in.leases != nil {
		return in.leases(ctx, etcd)
	}
	return in.st.Leases, nil
}

func (in roleInputs) AskMembers(ctx context.Context, etcd *druidv1alpha1.Etcd, targets []etcdclient.Target) ([]roles.MemberReport, error) {
	if in.members == nil {
		return nil, nil
	}
	return in.members(ctx, etcd, targets)
}

// ServeReads asks no member: plan explains a recorded state, in which a replaced member that is
// not Ready yet counts as not participating, and a member a failed handover went to as unheard,
// as the controller decides when their reads fail.
func (in roleInputs) ServeReads(context.Context, *druidv1alpha1.Etcd, []etcdclient.Target, []string) ([]string, error) {
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
func DecodeMemberStatus(data []byte) ([]roles.MemberReport, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, nil
	}
	var ms MemberStatusDocument
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&ms); err != nil {
		return nil, fmt.Errorf("decoding member status: %w", err)
	}
	for i, m := range ms.Members {
		if m.Name == "" {
			return nil, fmt.Errorf("member status entry %d has no name", i)
		}
	}
	return ms.Members, nil
}
