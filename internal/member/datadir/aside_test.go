package datadir

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var asideNow = time.Date(2026, 11, 26, 10, 15, 0, 123, time.FixedZone("CET", 3600))

func TestMoveAside(t *testing.T) {
	for _, tc := range []struct {
		name string
		// taken are names (suffixes of dir) that exist before the move, each holding a file
		// "keep" unless it ends in "/" (then an empty directory).
		taken   []string
		missing bool
		file    bool   // dir is a file
		want    string // suffix of dir; "" for an error
	}{
		{name: "to a sibling named by the UTC time", want: ".aside-20261126T091500Z"},
		{name: "a taken name gets -2", taken: []string{".aside-20261126T091500Z"}, want: ".aside-20261126T091500Z-2"},
		{name: "an empty directory under the name is not replaced", taken: []string{".aside-20261126T091500Z/"}, want: ".aside-20261126T091500Z-2"},
		{name: "several taken names", taken: []string{".aside-20261126T091500Z", ".aside-20261126T091500Z-2/"}, want: ".aside-20261126T091500Z-3"},
		{name: "no data dir", missing: true},
		{name: "a file, not a directory", file: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "new.etcd")
			switch {
			case tc.file:
				writeFile(t, dir, []byte("x"))
			case !tc.missing:
				mkdir(t, filepath.Join(dir, "member", "wal"))
				writeFile(t, filepath.Join(dir, "member", "wal", "0.wal"), []byte("wal"))
			}
			for _, name := range tc.taken {
				p := dir + strings.TrimSuffix(name, "/")
				mkdir(t, p)
				if !strings.HasSuffix(name, "/") {
					writeFile(t, filepath.Join(p, "keep"), []byte("keep"))
				}
			}
			got, err := MoveAside(dir, asideNow)
			if tc.want == "" {
				if err == nil {
					t.Fatalf("moved to %s", got)
				}
				if list, _ := ListAside(dir); len(list) != 0 {
					t.Errorf("left %v behind", list)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != dir+tc.want {
				t.Errorf("moved to %s, want %s", got, dir+tc.want)
			}
			if _, err := os.Lstat(dir); !os.IsNotExist(err) {
				t.Errorf("%s still there: %v", dir, err)
			}
			if b, err := os.ReadFile(filepath.Join(got, "member", "wal", "0.wal")); err != nil || string(b) != "wal" {
				t.Errorf("moved data: %q, %v", b, err)
			}
			for _, name := range tc.taken {
				p := dir + strings.TrimSuffix(name, "/")
				entries, err := os.ReadDir(p)
				want := 1
				if strings.HasSuffix(name, "/") {
					want = 0
				}
				if err != nil || len(entries) != want {
					t.Errorf("%s changed: %v, %v", p, entries, err)
				}
			}
		})
	}
}

func TestListAside(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "new.etcd")
	files := map[string]int{
		"new.etcd/member/snap/db":                          100, // the data dir itself
		"new.etcd.aside-20261126T091500Z/member/snap/db":   30,
		"new.etcd.aside-20261126T091500Z/member/wal/0.wal": 12,
		"new.etcd.aside-20261126T091500Z-2/member/snap/db": 5,
		"new.etcd.aside-1732000000/member/snap/db":         7, // the init step's earlier names
		"new.etcd.aside-by-hand/member/snap/db":            3,
		"new.etcd.asideX/member/snap/db":                   1, // not asides of new.etcd
		"new.etcd2.aside-20261126T091500Z/member/snap/db":  1,
		"other.etcd.aside-20261126T091500Z/member/snap/db": 1,
	}
	for name, size := range files {
		p := filepath.Join(parent, name)
		mkdir(t, filepath.Dir(p))
		writeFile(t, p, make([]byte, size))
	}
	// A symbolic link is not followed: its target's bytes are not the aside's.
	big := filepath.Join(parent, "big")
	writeFile(t, big, make([]byte, 1000))
	if err := os.Symlink(big, filepath.Join(parent, "new.etcd.aside-20261126T091500Z", "link")); err != nil {
		t.Fatal(err)
	}
	handMade := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	if err := os.Chtimes(filepath.Join(parent, "new.etcd.aside-by-hand"), handMade, handMade); err != nil {
		t.Fatal(err)
	}

	got, err := ListAside(dir)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 26, 9, 15, 0, 0, time.UTC)
	want := []Aside{
		{Path: filepath.Join(parent, "new.etcd.aside-1732000000"), Time: time.Unix(1732000000, 0).UTC(), Bytes: 7},
		{Path: filepath.Join(parent, "new.etcd.aside-by-hand"), Time: handMade, Bytes: 3},
		{Path: filepath.Join(parent, "new.etcd.aside-20261126T091500Z"), Time: at, Bytes: 42},
		{Path: filepath.Join(parent, "new.etcd.aside-20261126T091500Z-2"), Time: at, Bytes: 5},
	}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i].Path != want[i].Path || !got[i].Time.Equal(want[i].Time) || got[i].Bytes != want[i].Bytes {
			t.Errorf("[%d] got %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestListAsideWithoutParent(t *testing.T) {
	got, err := ListAside(filepath.Join(t.TempDir(), "gone", "new.etcd"))
	if err != nil || len(got) != 0 {
		t.Errorf("got %v, %v; want nothing", got, err)
	}
}

// TestMoveAsideRoundTrip moves a real data dir aside twice in the same second and lists both.
func TestMoveAsideRoundTrip(t *testing.T) {
	dir := goldenDir(t)
	size, _, err := sizeOf(dir)
	if err != nil {
		t.Fatal(err)
	}
	first, err := MoveAside(dir, asideNow)
	if err != nil {
		t.Fatal(err)
	}
	mkdir(t, filepath.Join(dir, "member"))
	writeFile(t, filepath.Join(dir, "member", "x"), []byte("12345"))
	second, err := MoveAside(dir, asideNow)
	if err != nil {
		t.Fatal(err)
	}
	list, err := ListAside(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].Path != first || list[1].Path != second {
		t.Fatalf("listed %+v, want %s and %s", list, first, second)
	}
	if list[0].Bytes != size || list[1].Bytes != 5 {
		t.Errorf("sizes %d and %d, want %d and 5", list[0].Bytes, list[1].Bytes, size)
	}
	for _, a := range list {
		if !a.Time.Equal(asideNow.Truncate(time.Second)) {
			t.Errorf("%s: time %v, want %v", a.Path, a.Time, asideNow.Truncate(time.Second))
		}
	}
	// Set aside, the data is still what etcd wrote.
	if r, err := Inspect(first); err != nil || r.State != Valid {
		t.Errorf("the data set aside: %s %s, %v", r.State, r.Reason, err)
	}
}
