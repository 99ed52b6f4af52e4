// Package explain runs the OnDelete planner on a cluster state, saved or read live, the way the
// controller would, and reports the decision together with the role resolution behind it. It
// backs the `etcd-conductor plan` command. Decoding and planning are pure; ReadLive and
// AskMembers do I/O only through the clients the caller passes in.
package explain

import (
	"bytes"
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
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/etcd-conductor/etcd-conductor/internal/roles"
	"github.com/etcd-conductor/etcd-conductor/internal/rollout"
)

// Output is what `plan` prints: the decision, and the roles it was based on.
type Output struct {
	Action          rollout.Action          `json:"action"`
	Pods            []string                `json:"pods"`
	Rule            rollout.RuleID          `json:"rule"`
	Reason          string                  `json:"reason"`
	RoleSource      roles.Source            `json:"roleSource"`
	ConditionReason string                  `json:"conditionReason"`
	WaitingFor      []string                `json:"waitingFor,omitempty"`
	StatefulSet     string                  `json:"statefulSet"`
	UpdateRevision  string                  `json:"updateRevision"`
	Roles           map[string]rollout.Role `json:"roles"`
	RoleMismatch    bool                    `json:"roleMismatch,omitempty"`
	RoleDetail      string                  `json:"roleDetail"`
	// MemberQueryError says why asking the members live failed; roles then come from Leases.
	MemberQueryError string `json:"memberQueryError,omitempty"`
}

// MemberStatus is the optional member-status document:
// {"members":[{"name":"etcd-main-0","id":"8e9e05c52164694d","leaderID":"…","reachable":true}]}.
type MemberStatus struct {
	Members []roles.MemberReport `json:"members"`
}

// State is what plan needs from the cluster: one StatefulSet, the pods of the namespace (or
// already only its own) and the namespace's Leases.
type State struct {
	StatefulSet *appsv1.StatefulSet
	Pods        []corev1.Pod
	Leases      []coordinationv1.Lease
}

// Explain decodes state (a Kubernetes List or a stream of objects, YAML or JSON, as
// `kubectl get sts,pods,leases -o yaml` prints it: exactly one StatefulSet, its Pods and member
// Leases; other kinds are ignored) and, if not empty, memberStatus, then resolves roles and
// plans. now decides which Leases are still fresh.
func Explain(state []byte, memberStatus []byte, mode roles.Mode, now time.Time) (Output, error) {
	st, err := DecodeState(state)
	if err != nil {
		return Output{}, err
	}
	members, err := DecodeMemberStatus(memberStatus)
	if err != nil {
		return Output{}, err
	}
	return ExplainState(st, members, mode, now), nil
}

// ExplainState is Explain on objects already at hand, e.g. read from a live cluster.
func ExplainState(st State, members []roles.MemberReport, mode roles.Mode, now time.Time) Output {
	sts := st.StatefulSet
	pods := podsOf(sts, st.Pods)
	podNames := make([]string, len(pods))
	for i := range pods {
		podNames[i] = pods[i].Name
	}
	resolution := roles.Resolve(podNames, members, leasesIn(sts.Namespace, st.Leases), mode, now)
	decision := rollout.Plan(rollout.Observe(sts, pods, resolution.Roles))

	return Output{
		Action:          decision.Action,
		Pods:            decision.Pods,
		Rule:            decision.Rule,
		Reason:          decision.Reason,
		RoleSource:      resolution.Source,
		ConditionReason: decision.Rule.ConditionReason(),
		WaitingFor:      decision.WaitingFor,
		StatefulSet:     sts.Namespace + "/" + sts.Name,
		UpdateRevision:  sts.Status.UpdateRevision,
		Roles:           resolution.Roles,
		RoleMismatch:    resolution.Mismatch,
		RoleDetail:      resolution.Detail,
	}
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
	return State{StatefulSet: sts, Pods: objs.pods, Leases: objs.leases}, nil
}

type stateObjects struct {
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
	for _, add := range []func(*runtime.Scheme) error{appsv1.AddToScheme, corev1.AddToScheme, coordinationv1.AddToScheme} {
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
	var ms MemberStatus
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

// podsOf keeps the pods the StatefulSet controls: a controller reference to it or, for pods
// without any controller, the StatefulSet's selector. kubectl lists every pod of the
// namespace, including other etcds'.
func podsOf(sts *appsv1.StatefulSet, pods []corev1.Pod) []corev1.Pod {
	var selector labels.Selector
	if sts.Spec.Selector != nil {
		if s, err := metav1.LabelSelectorAsSelector(sts.Spec.Selector); err == nil {
			selector = s
		}
	}
	var out []corev1.Pod
	for _, p := range pods {
		if p.Namespace != sts.Namespace {
			continue
		}
		if ref := metav1.GetControllerOf(&p); ref != nil {
			if ref.Kind == "StatefulSet" && ref.Name == sts.Name && (sts.UID == "" || ref.UID == sts.UID) {
				out = append(out, p)
			}
			continue
		}
		if selector != nil && !selector.Empty() && selector.Matches(labels.Set(p.Labels)) {
			out = append(out, p)
		}
	}
	return out
}

func leasesIn(namespace string, leases []coordinationv1.Lease) []coordinationv1.Lease {
	var out []coordinationv1.Lease
	for _, l := range leases {
		if l.Namespace == namespace {
			out = append(out, l)
		}
	}
	return out
}
