package workload_test

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/etcd-conductor/etcd-conductor/test/workload"
)

// t0 is the start of every fabricated history; at(ms) a time in it.
var t0 = time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

const (
	keyA = workload.KeyPrefix + "run/000000000001"
	keyB = workload.KeyPrefix + "run/000000000002"
	valA = "run#1"
	valB = "run#2"
)

func acked(key, value string, call, ret int) workload.PutOp {
	return workload.PutOp{Key: key, Value: value, Call: at(call), Return: at(ret), Outcome: workload.OutcomeOK, Member: "etcd-0", Attempts: 1}
}

func unknown(key, value string, call int) workload.PutOp {
	return workload.PutOp{Key: key, Value: value, Call: at(call), Outcome: workload.OutcomeUnknown, Member: "etcd-1", Attempts: 2}
}

func failed(key, value string) workload.PutOp {
	return workload.PutOp{Key: key, Value: value, Outcome: workload.OutcomeFailed}
}

func read(key, member string, call, ret int, value string) workload.ReadOp {
	return workload.ReadOp{Key: key, Member: member, Call: at(call), Return: at(ret), Found: value != "", Value: value}
}

const absent = ""

func TestCheckHistory(t *testing.T) {
	tests := []struct {
		name    string
		history workload.History
		exclude []string
		want    workload.Verdict
		// wantInError are fragments the error names: the key, the members, the operations.
		wantInError []string
	}{
		{
			name:    "empty history",
			history: workload.History{},
			want:    workload.VerdictOK,
		},
		{
			name: "reads concurrent with the put see either state",
			history: workload.History{
				Puts:  []workload.PutOp{acked(keyA, valA, 1, 4)},
				Reads: []workload.ReadOp{read(keyA, "etcd-1", 2, 3, absent), read(keyA, "etcd-2", 2, 5, valA), read(keyA, "etcd-0", 5, 6, valA)},
			},
			want: workload.VerdictOK,
		},
		{
			name: "a read before the put's call sees nothing",
			history: workload.History{
				Puts:  []workload.PutOp{acked(keyA, valA, 3, 4)},
				Reads: []workload.ReadOp{read(keyA, "etcd-1", 1, 2, absent)},
			},
			want: workload.VerdictOK,
		},
		{
			name: "an unknown put may take effect much later",
			history: workload.History{
				Puts:  []workload.PutOp{unknown(keyA, valA, 1)},
				Reads: []workload.ReadOp{read(keyA, "etcd-0", 5, 6, absent), read(keyA, "etcd-1", 10, 11, valA), read(keyA, "etcd-2", 12, 13, valA)},
			},
			want: workload.VerdictOK,
		},
		{
			name: "an unknown put may never take effect",
			history: workload.History{
				Puts:  []workload.PutOp{unknown(keyA, valA, 1)},
				Reads: []workload.ReadOp{read(keyA, "etcd-0", 50, 60, absent)},
			},
			want: workload.VerdictOK,
		},
		{
			name: "keys are independent",
			history: workload.History{
				Puts:  []workload.PutOp{acked(keyA, valA, 1, 2), acked(keyB, valB, 3, 4)},
				Reads: []workload.ReadOp{read(keyB, "etcd-0", 2, 3, absent), read(keyA, "etcd-0", 2, 3, valA)},
			},
			want: workload.VerdictOK,
		},
		{
			name: "stale read: the put was acknowledged before the read was sent",
			history: workload.History{
				Puts:  []workload.PutOp{acked(keyA, valA, 1, 2)},
				Reads: []workload.ReadOp{read(keyA, "etcd-2", 3, 4, absent)},
			},
			want:        workload.VerdictIllegal,
			wantInError: []string{"key " + keyA, "1 of 1 keys illegal", "read on etcd-2", "-> absent", `put "run#1"`, "acknowledged by etcd-0"},
		},
		{
			name: "read of the future: the value was seen before its put was sent",
			history: workload.History{
				Puts:  []workload.PutOp{acked(keyA, valA, 3, 4)},
				Reads: []workload.ReadOp{read(keyA, "etcd-1", 1, 2, valA)},
			},
			want:        workload.VerdictIllegal,
			wantInError: []string{"key " + keyA, `read on etcd-1`, `-> "run#1"`},
		},
		{
			name: "rollback: the value was seen, then gone",
			history: workload.History{
				Puts:  []workload.PutOp{acked(keyA, valA, 1, 2)},
				Reads: []workload.ReadOp{read(keyA, "etcd-0", 3, 4, valA), read(keyA, "etcd-1", 5, 6, absent)},
			},
			want:        workload.VerdictIllegal,
			wantInError: []string{"key " + keyA, "read on etcd-1", "read on etcd-0"},
		},
		{
			name: "rollback of an unknown put: seen, then gone",
			history: workload.History{
				Puts:  []workload.PutOp{unknown(keyA, valA, 1)},
				Reads: []workload.ReadOp{read(keyA, "etcd-0", 3, 4, valA), read(keyA, "etcd-1", 5, 6, absent)},
			},
			want:        workload.VerdictIllegal,
			wantInError: []string{"key " + keyA, "unknown (last attempt on etcd-1, 2 attempts)"},
		},
		{
			name: "a put that reached no member cannot be seen",
			history: workload.History{
				Puts:  []workload.PutOp{failed(keyA, valA)},
				Reads: []workload.ReadOp{read(keyA, "etcd-0", 3, 4, valA)},
			},
			want:        workload.VerdictIllegal,
			wantInError: []string{"key " + keyA},
		},
		{
			name: "a value never written",
			history: workload.History{
				Puts:  []workload.PutOp{acked(keyA, valA, 1, 2)},
				Reads: []workload.ReadOp{read(keyA, "etcd-0", 3, 4, "other")},
			},
			want: workload.VerdictIllegal,
		},
		{
			name: "an excluded key's rollback is not judged",
			history: workload.History{
				Puts:  []workload.PutOp{acked(keyA, valA, 1, 2)},
				Reads: []workload.ReadOp{read(keyA, "etcd-0", 3, 4, valA), read(keyA, "etcd-1", 5, 6, absent)},
			},
			exclude: []string{keyA},
			want:    workload.VerdictOK,
		},
		{
			name: "excluding one key does not hide another",
			history: workload.History{
				Puts:  []workload.PutOp{acked(keyA, valA, 1, 2), acked(keyB, valB, 3, 4)},
				Reads: []workload.ReadOp{read(keyA, "etcd-0", 3, 4, valA), read(keyA, "etcd-1", 5, 6, absent), read(keyB, "etcd-2", 5, 6, absent)},
			},
			exclude:     []string{keyA},
			want:        workload.VerdictIllegal,
			wantInError: []string{"key " + keyB, "read on etcd-2"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			o := workload.CheckOptions{VisualizeDir: dir, Exclude: map[string]bool{}}
			for _, k := range tt.exclude {
				o.Exclude[k] = true
			}
			res, err := workload.CheckHistory(tt.history, o)
			if res.Verdict != tt.want {
				t.Fatalf("verdict %s, want %s (error: %v)", res.Verdict, tt.want, err)
			}
			if (err != nil) != (tt.want != workload.VerdictOK) {
				t.Fatalf("error %v with verdict %s", err, res.Verdict)
			}
			for _, frag := range tt.wantInError {
				if !strings.Contains(err.Error(), frag) {
					t.Errorf("error does not name %q:\n%v", frag, err)
				}
			}
			if res.ExcludedKeys != len(tt.exclude) {
				t.Errorf("excluded %d keys, want %d", res.ExcludedKeys, len(tt.exclude))
			}
			if tt.want == workload.VerdictIllegal {
				if res.IllegalKeys != 1 {
					t.Errorf("%d illegal keys, want 1", res.IllegalKeys)
				}
				if !strings.HasPrefix(res.Visualization, dir) {
					t.Errorf("visualization %q not under %s", res.Visualization, dir)
				} else if fi, err := os.Stat(res.Visualization); err != nil || fi.Size() == 0 {
					t.Errorf("visualization %s not written: %v", res.Visualization, err)
				}
			}
		})
	}
}

// TestCheckHistoryCounts: failed puts are not operations; reads and puts of excluded keys
// neither.
func TestCheckHistoryCounts(t *testing.T) {
	h := workload.History{
		Puts:  []workload.PutOp{acked(keyA, valA, 1, 2), unknown(keyB, valB, 3), failed(workload.KeyPrefix+"run/3", "run#3")},
		Reads: []workload.ReadOp{read(keyA, "etcd-0", 3, 4, valA), read(keyB, "etcd-1", 4, 5, absent)},
	}
	res, err := workload.CheckHistory(h, workload.CheckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Operations != 4 || res.Puts != 2 || res.Reads != 2 || res.Keys != 2 {
		t.Errorf("counted %+v, want 4 operations: 2 puts, 2 reads on 2 keys", res)
	}
	if s := res.Summary(); !strings.Contains(s, "linearizable=ok (4 ops") {
		t.Errorf("summary %q", s)
	}
}

// TestCheckHistoryTimeoutIsNotAPass: a history porcupine cannot decide in time is reported as
// unknown, with an error. Many concurrent puts of distinct values on one key, read back in every
// order and then as a value never written, leave it an exponential search.
func TestCheckHistoryTimeoutIsNotAPass(t *testing.T) {
	var h workload.History
	for i := 0; i < 40; i++ {
		v := fmt.Sprintf("v%d", i)
		h.Puts = append(h.Puts, acked(keyA, v, 0, 1000))
		h.Reads = append(h.Reads, read(keyA, fmt.Sprintf("etcd-%d", i%3), 0, 1000, v))
	}
	h.Reads = append(h.Reads, read(keyA, "etcd-0", 0, 1000, "never written"))
	started := time.Now()
	res, err := workload.CheckHistory(h, workload.CheckOptions{Timeout: 100 * time.Millisecond, VisualizeDir: t.TempDir()})
	if res.Verdict != workload.VerdictUnknown || err == nil || !strings.Contains(err.Error(), "not a pass") {
		t.Fatalf("verdict %s, error %v; want unknown with an error", res.Verdict, err)
	}
	if took := time.Since(started); took > 10*time.Second {
		t.Errorf("a 100ms check took %s", took)
	}
}
