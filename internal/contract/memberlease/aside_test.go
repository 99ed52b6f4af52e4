package memberlease

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 26, 10, 15, 0, 0, time.UTC)

func aside(n int) []Aside {
	var out []Aside
	for i := range n {
		out = append(out, Aside{Path: fmt.Sprintf("/var/etcd/data/new.etcd.aside-%d", i), Time: t0.Add(time.Duration(i) * time.Hour), Bytes: int64(100 * (i + 1))})
	}
	return out
}

func TestNewDataAside(t *testing.T) {
	for _, tc := range []struct {
		name       string
		all        []Aside
		wantCount  int
		wantBytes  int64
		wantNewest []string // path suffixes, in order
	}{
		{name: "nothing aside", wantCount: 0, wantBytes: 0},
		{name: "newest first", all: aside(3), wantCount: 3, wantBytes: 600, wantNewest: []string{"-2", "-1", "-0"}},
		{name: "the newest ten listed, all counted", all: aside(12), wantCount: 12, wantBytes: 7800,
			wantNewest: []string{"-11", "-10", "-9", "-8", "-7", "-6", "-5", "-4", "-3", "-2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := NewDataAside(tc.all)
			if got.Count != tc.wantCount || got.Bytes != tc.wantBytes {
				t.Errorf("count %d, bytes %d; want %d, %d", got.Count, got.Bytes, tc.wantCount, tc.wantBytes)
			}
			var paths []string
			for _, a := range got.Newest {
				paths = append(paths, a.Path[strings.LastIndex(a.Path, "-"):])
			}
			if !slices.Equal(paths, tc.wantNewest) {
				t.Errorf("listed %v, want %v", paths, tc.wantNewest)
			}
		})
	}
}

func TestDataAsideAnnotationRoundTrip(t *testing.T) {
	all := []Aside{{Path: "/d/new.etcd.aside-1764152100", Time: time.Date(2026, 11, 26, 11, 15, 0, 500, time.FixedZone("CET", 3600)), Bytes: 42}}
	raw := NewDataAside(all).Annotation()
	if want := `{"count":1,"bytes":42,"newest":[{"path":"/d/new.etcd.aside-1764152100","time":"2026-11-26T10:15:00Z","bytes":42}]}`; raw != want {
		t.Errorf("annotation %s, want %s", raw, want)
	}
	got, ok := ParseDataAside(map[string]string{AnnotationDataAside: raw})
	if !ok || got.Count != 1 || got.Bytes != 42 || len(got.Newest) != 1 || !got.Newest[0].Time.Equal(t0) {
		t.Errorf("parsed %+v, %v", got, ok)
	}
}

func TestParseDataAsideRefusesNonsense(t *testing.T) {
	long := NewDataAside(aside(3))
	long.Count = 20
	for i := range 15 {
		long.Newest = append(long.Newest, Aside{Path: fmt.Sprintf("/x-%d", i), Time: t0.Add(-time.Duration(i+1) * time.Hour), Bytes: 1})
	}
	if got, ok := ParseDataAside(map[string]string{AnnotationDataAside: long.Annotation()}); !ok || len(got.Newest) != MaxAsideListed || got.Newest[0].Time.Before(got.Newest[1].Time) {
		t.Errorf("a long list: parsed %d entries (ok %v), want the newest %d, newest first", len(got.Newest), ok, MaxAsideListed)
	}
	for _, raw := range []string{
		"", "not json", `{"count":-1}`, `{"count":0,"bytes":-5}`,
		`{"count":0,"newest":[{"path":"/a","time":"2026-11-26T10:15:00Z","bytes":1}]}`,
		`{"count":1,"newest":[{"path":"","time":"2026-11-26T10:15:00Z","bytes":1}]}`,
		`{"count":1,"newest":[{"path":"/a","time":"2026-11-26T10:15:00Z","bytes":-1}]}`,
	} {
		if got, ok := ParseDataAside(map[string]string{AnnotationDataAside: raw}); ok {
			t.Errorf("%q parsed as %+v", raw, got)
		}
	}
}
