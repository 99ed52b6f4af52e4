package workload

import (
	"context"
	"strings"
	"testing"
	"time"

	conductortls "github.com/etcd-conductor/etcd-conductor/tls"
)

// TestRecorderStopFailsOnIllegalHistory drives the hook every scenario goes through,
// Recorder.Stop, with a fabricated history and no cluster: a recorder that was never started
// audits nothing (no write acknowledged), so the history alone decides its error. The e2e
// scenarios fail on that error (checkWrites, t.Errorf on the recorder's error).
func TestRecorderStopFailsOnIllegalHistory(t *testing.T) {
	base := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	ms := func(n int) time.Time { return base.Add(time.Duration(n) * time.Millisecond) }
	key := KeyPrefix + "hook/000000000001"
	put := PutOp{Key: key, Value: "hook#1", Call: ms(1), Return: ms(2), Outcome: OutcomeOK, Member: "etcd-0", Attempts: 1}
	seen := ReadOp{Key: key, Member: "etcd-1", Call: ms(3), Return: ms(4), Found: true, Value: "hook#1"}
	gone := ReadOp{Key: key, Member: "etcd-2", Call: ms(5), Return: ms(6)}

	tests := []struct {
		name    string
		reads   []ReadOp
		exclude []string
		wantErr bool
	}{
		{name: "legal history passes", reads: []ReadOp{seen}},
		{name: "rollback fails the run", reads: []ReadOp{seen, gone}, wantErr: true},
		{name: "stale read fails the run", reads: []ReadOp{gone}, wantErr: true},
		{name: "a key lost by design is excluded", reads: []ReadOp{seen, gone}, exclude: []string{key}},
		{name: "excluding another key changes nothing", reads: []ReadOp{seen, gone}, exclude: []string{key + "0"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := NewRecorder(StaticEndpoints(), conductortls.ClientMaterial{}, RecorderOptions{
				Expected: 3,
				Check:    CheckOptions{VisualizeDir: t.TempDir()},
			})
			if err != nil {
				t.Fatal(err)
			}
			// What the writer and the reader would have recorded.
			r.writer.res.Puts = []PutOp{put}
			r.reader.res.Reads = tt.reads
			r.Exclude(tt.exclude...)

			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			rep, err := r.Stop(ctx)
			t.Log(rep.Summary())
			if (err != nil) != tt.wantErr {
				t.Fatalf("Stop error %v, want error %v", err, tt.wantErr)
			}
			if !tt.wantErr {
				if rep.Linearizability.Verdict != VerdictOK || rep.LinearizabilityError != "" {
					t.Errorf("report says %s %q, want ok", rep.Linearizability.Verdict, rep.LinearizabilityError)
				}
				return
			}
			if !strings.Contains(err.Error(), "linearizability: history not linearizable") || !strings.Contains(err.Error(), key) {
				t.Errorf("error does not say which key is not linearizable: %v", err)
			}
			if rep.Linearizability.Verdict != VerdictIllegal || rep.LinearizabilityError == "" {
				t.Errorf("report says %s %q, want illegal", rep.Linearizability.Verdict, rep.LinearizabilityError)
			}
			if !strings.Contains(rep.Summary(), "NOT LINEARIZABLE") {
				t.Errorf("summary does not say so: %s", rep.Summary())
			}
		})
	}
}
