package resources

import (
	"fmt"
	"net/url"
	"strings"

	appsv1 "k8s.io/api/apps/v1"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/contract/memberpod"
)

// ErrInvalidAdditionalPeerURLs: spec.etcd.additionalAdvertisePeerURLs names no member of this
// Etcd, names one twice, or holds a URL etcd could not advertise.
const ErrInvalidAdditionalPeerURLs = "ERR_INVALID_ADDITIONAL_PEER_URLS"

// ServicePeerURL is the peer URL of the member of pod under the peer Service, the one every
// member advertises first.
func ServicePeerURL(e *druidv1alpha1.Etcd, scheme, pod string) string {
	return fmt.Sprintf("%s://%s:%d", scheme, MemberDNSName(e.Name, e.Namespace, pod), ServerPort(e))
}

// AdditionalPeerURLs are the extra peer URLs spec.etcd.additionalAdvertisePeerURLs gives the
// member of pod. The field names members by their etcd member name (with spec.memberNamePrefix
// when set), as etcd-druid's validation has it.
func AdditionalPeerURLs(e *druidv1alpha1.Etcd, pod string) []string {
	member := MemberNameOf(e, pod)
	for _, m := range e.Spec.Etcd.AdditionalAdvertisePeerURLs {
		if m.MemberName == member {
			return append([]string(nil), m.URLs...)
		}
	}
	return nil
}

// PeerURLs are the peer URLs the member of pod advertises with the given scheme: its name under
// the peer Service, then its additional ones. A learner is added with exactly these.
func PeerURLs(e *druidv1alpha1.Etcd, scheme, pod string) []string {
	return append([]string{ServicePeerURL(e, scheme, pod)}, AdditionalPeerURLs(e, pod)...)
}

// additionalPeerURLsFlag is member-init's flag holding every member's additional peer URLs, ""
// when there are none (the template then stays as it was before the field was acted on).
func additionalPeerURLsFlag(e *druidv1alpha1.Etcd) string {
	var urls []memberpod.MemberURL
	for _, m := range e.Spec.Etcd.AdditionalAdvertisePeerURLs {
		for _, u := range m.URLs {
			urls = append(urls, memberpod.MemberURL{Member: m.MemberName, URL: u})
		}
	}
	if len(urls) == 0 {
		return ""
	}
	return "--" + memberpod.AdditionalPeerURLsFlag + "=" + memberpod.FormatPeerURLs(urls)
}

// RunningAdditionalPeerURLs are the additional peer URLs the StatefulSet's template gives the
// member of pod (what a pod at its revision advertises after its service URL); ok is false when
// the template has no member-init container.
func RunningAdditionalPeerURLs(e *druidv1alpha1.Etcd, sts *appsv1.StatefulSet, pod string) (urls []string, ok bool) {
	if sts == nil {
		return nil, false
	}
	for _, c := range sts.Spec.Template.Spec.InitContainers {
		if c.Name != MemberInitContainerName {
			continue
		}
		for _, arg := range c.Args {
			if value, found := strings.CutPrefix(arg, "--"+memberpod.AdditionalPeerURLsFlag+"="); found {
				return memberpod.PeerURLsOf(value, MemberNameOf(e, pod)), true
			}
		}
		return nil, true
	}
	return nil, false
}

// validateAdditionalPeerURLs refuses entries that would make members advertise what etcd cannot
// use or that belong to no member of this Etcd. Entries for ordinals at or above spec.replicas
// are accepted: they wait for a scale-out (etcd-druid refuses them; here a scale-in need not
// edit them first).
func validateAdditionalPeerURLs(e *druidv1alpha1.Etcd) []Problem {
	var problems []Problem
	bad := func(format string, args ...any) {
		problems = append(problems, Problem{ErrInvalidAdditionalPeerURLs, "spec.etcd.additionalAdvertisePeerURLs: " + fmt.Sprintf(format, args...)})
	}
	members := map[string]bool{}
	urls := map[string]string{}
	for _, m := range e.Spec.Etcd.AdditionalAdvertisePeerURLs {
		if _, ok := PodOfMember(e, m.MemberName); !ok {
			bad("%q is no member name of this Etcd (members are named %s)", m.MemberName, MemberNameOf(e, e.Name+"-<ordinal>"))
		}
		if members[m.MemberName] {
			bad("member %q is listed twice", m.MemberName)
		}
		members[m.MemberName] = true
		for _, raw := range m.URLs {
			if why := peerURLProblem(raw); why != "" {
				bad("URL %q of member %q %s", raw, m.MemberName, why)
			}
			if other, seen := urls[raw]; seen {
				bad("URL %q is given to %q and to %q: etcd refuses a peer URL two members advertise", raw, other, m.MemberName)
			}
			urls[raw] = m.MemberName
		}
	}
	return problems
}

// peerURLProblem says why etcd could not advertise raw as a peer URL, "" when it can. A comma
// would split it in etcd's own lists.
func peerURLProblem(raw string) string {
	if strings.ContainsAny(raw, ", ") {
		return "holds a comma or a space"
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return "does not parse: " + err.Error()
	case u.Scheme != "http" && u.Scheme != "https":
		return "is neither http:// nor https://"
	case u.Host == "" || u.Port() == "":
		return "has no host:port"
	case u.Path != "" && u.Path != "/" || u.RawQuery != "" || u.Fragment != "":
		return "has a path, query or fragment (a peer URL is scheme://host:port)"
	}
	return ""
}
