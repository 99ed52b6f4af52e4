package memberpod

import (
	"slices"
	"testing"
)

func TestPeerURLsRoundTrip(t *testing.T) {
	value := FormatPeerURLs([]MemberURL{
		{Member: "p-etcd-0", URL: "https://10.0.0.1:2380"},
		{Member: "p-etcd-1", URL: "https://10.0.0.2:2380"},
		{Member: "p-etcd-0", URL: "https://m0.example:2380"},
	})
	if value != "p-etcd-0=https://10.0.0.1:2380,p-etcd-1=https://10.0.0.2:2380,p-etcd-0=https://m0.example:2380" {
		t.Fatalf("FormatPeerURLs = %s", value)
	}
	for _, tt := range []struct {
		member string
		want   []string
	}{
		{"p-etcd-0", []string{"https://10.0.0.1:2380", "https://m0.example:2380"}},
		{"p-etcd-1", []string{"https://10.0.0.2:2380"}},
		{"p-etcd-2", nil},
		{"etcd-0", nil},
		{"", nil},
	} {
		t.Run(tt.member, func(t *testing.T) {
			if got := PeerURLsOf(value, tt.member); !slices.Equal(got, tt.want) {
				t.Errorf("PeerURLsOf(%s) = %v, want %v", tt.member, got, tt.want)
			}
		})
	}
	if got := PeerURLsOf("", "p-etcd-0"); got != nil {
		t.Errorf("PeerURLsOf of nothing = %v", got)
	}
}
