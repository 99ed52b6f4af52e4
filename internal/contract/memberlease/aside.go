package memberlease

import (
	"encoding/json"
	"slices"
	"strings"
	"time"
)

const (
	// AnnotationDataAside on a member Lease is what the member's init step keeps aside next to
	// its data dir (internal/member/datadir.MoveAside: data is never deleted), a DataAside in JSON. A
	// member pod and namespace users can write it, so the operator only reports it (the Etcd's
	// status and metrics) and never acts on it.
	AnnotationDataAside = "etcd-conductor.io/data-aside"
	// MaxAsideListed bounds the entries a DataAside lists, so the annotation stays small;
	// Count and Bytes still cover everything kept aside.
	MaxAsideListed = 10
)

// Aside is one data dir kept aside.
type Aside struct {
	// Path is where it is, in the member pod.
	Path string `json:"path"`
	// Time is when it was set aside (UTC, whole seconds: RFC 3339).
	Time time.Time `json:"time"`
	// Bytes is the size of its regular files.
	Bytes int64 `json:"bytes"`
}

// DataAside is the report: totals over everything kept aside, and the newest entries.
type DataAside struct {
	// Count is how many data dirs are kept aside; Bytes their size in all.
	Count int   `json:"count"`
	Bytes int64 `json:"bytes"`
	// Newest lists at most MaxAsideListed of them, newest first.
	Newest []Aside `json:"newest,omitempty"`
}

// NewDataAside summarizes all the data dirs kept aside: the totals, and the newest
// MaxAsideListed entries, newest first, with times in UTC to the second.
func NewDataAside(all []Aside) DataAside {
	d := DataAside{Count: len(all)}
	sorted := make([]Aside, 0, len(all))
	for _, a := range all {
		d.Bytes += a.Bytes
		a.Time = a.Time.UTC().Truncate(time.Second)
		sorted = append(sorted, a)
	}
	slices.SortStableFunc(sorted, newestFirst)
	if len(sorted) > MaxAsideListed {
		sorted = sorted[:MaxAsideListed]
	}
	if len(sorted) > 0 {
		d.Newest = sorted
	}
	return d
}

func newestFirst(a, b Aside) int {
	if c := b.Time.Compare(a.Time); c != 0 {
		return c
	}
	return strings.Compare(b.Path, a.Path)
}

// Annotation is the report as AnnotationDataAside's value.
func (d DataAside) Annotation() string { return jsonValue(d) }

// ParseDataAside reads AnnotationDataAside; ok is false when there is none or it does not make
// sense (negative totals, more listed than counted). At most MaxAsideListed entries are kept,
// newest first, whatever was written.
func ParseDataAside(annotations map[string]string) (DataAside, bool) {
	raw := annotations[AnnotationDataAside]
	if raw == "" {
		return DataAside{}, false
	}
	var d DataAside
	if err := json.Unmarshal([]byte(raw), &d); err != nil || d.Count < 0 || d.Bytes < 0 || len(d.Newest) > d.Count {
		return DataAside{}, false
	}
	for _, a := range d.Newest {
		if a.Path == "" || a.Bytes < 0 {
			return DataAside{}, false
		}
	}
	slices.SortStableFunc(d.Newest, newestFirst)
	if len(d.Newest) > MaxAsideListed {
		d.Newest = d.Newest[:MaxAsideListed]
	}
	return d, true
}
