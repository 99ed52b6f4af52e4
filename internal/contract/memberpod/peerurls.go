package memberpod

import "strings"

// AdditionalPeerURLsFlag is member-init's flag that carries every member's additional peer URLs
// (etcd-druid's spec.etcd.additionalAdvertisePeerURLs). The pod template is shared by all
// members, so it holds all of them and each member's init step picks its own by its etcd member
// name. The value is spelled as etcd spells --initial-cluster: name=url,name=url.
const AdditionalPeerURLsFlag = "additional-peer-urls"

// MemberURL is one peer URL of one etcd member.
type MemberURL struct {
	Member string
	URL    string
}

// FormatPeerURLs spells urls as the flag's value, in the order given.
func FormatPeerURLs(urls []MemberURL) string {
	parts := make([]string, 0, len(urls))
	for _, u := range urls {
		parts = append(parts, u.Member+"="+u.URL)
	}
	return strings.Join(parts, ",")
}

// PeerURLsOf are member's URLs in a value FormatPeerURLs spelled, in its order; nil when none.
func PeerURLsOf(value, member string) []string {
	var out []string
	for _, entry := range strings.Split(value, ",") {
		if name, url, ok := strings.Cut(entry, "="); ok && name == member && url != "" {
			out = append(out, url)
		}
	}
	return out
}
