package resources

import "testing"

func TestTrustRestart(t *testing.T) {
	for _, tc := range []struct {
		name                       string
		running, recorded, current string
		wantTemplate, wantRecord   string
	}{
		{"new StatefulSet: recorded, no restart", "", "", "a", "", "a"},
		{"release before this one: recorded, no restart", "", "", "a", "", "a"},
		{"unchanged", "", "a", "a", "", "a"},
		{"CA bundle changed: restart", "", "a", "b", "b", "b"},
		{"changed again: restart again", "b", "b", "c", "c", "c"},
		{"changed back: a restart too", "c", "c", "b", "b", "b"},
		{"Secret unreadable: nothing changes", "b", "b", "", "b", "b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			template, record := TrustRestart(tc.running, tc.recorded, tc.current)
			if template != tc.wantTemplate || record != tc.wantRecord {
				t.Fatalf("TrustRestart(%q, %q, %q) = %q, %q; want %q, %q", tc.running, tc.recorded, tc.current, template, record, tc.wantTemplate, tc.wantRecord)
			}
		})
	}
}

func TestTrustChecksumNamesTheKind(t *testing.T) {
	ca := []byte("-----BEGIN CERTIFICATE-----")
	if TrustChecksum(map[string][]byte{"client": ca}) == TrustChecksum(map[string][]byte{"peer": ca}) {
		t.Fatal("the same bundle on client and on peer traffic must differ")
	}
	if TrustChecksum(map[string][]byte{"client": ca, "peer": ca}) != TrustChecksum(map[string][]byte{"peer": ca, "client": ca}) {
		t.Fatal("the checksum must not depend on map order")
	}
}
