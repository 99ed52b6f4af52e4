// Package memory measures the peak memory of the jobs the member pod's own containers do with a
// whole database: a full backup and a delta backup (the member-agent: backup.UploadFull, stream,
// spool, upload to S3, verify; the delta as its backup loop takes one) and a restore of both (the
// init step: restore.FromStore from S3 into a data dir, the delta replayed). Each runs alone in a
// child process, this test binary started again, so its peak resident set is its own: the limits
// in internal/operator/resources/statefulset.go come from these figures.
//
// A 256 MiB keyspace is written, snapshotted, uploaded and restored: 15 s on an idle 2-core
// machine, much more under load, so it runs only when asked:
// ETCD_CONDUCTOR_MEASURE_MEMORY=1 go test ./test/bench/memory -v -timeout 20m
package memory

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/etcd-conductor/etcd-conductor/etcdclient"
	"github.com/etcd-conductor/etcd-conductor/etcdclient/etcdtest"
	"github.com/etcd-conductor/etcd-conductor/internal/contract/snapshot"
	"github.com/etcd-conductor/etcd-conductor/internal/member/backup"
	"github.com/etcd-conductor/etcd-conductor/internal/member/restore"
	"github.com/etcd-conductor/etcd-conductor/internal/store/backupstore"
	"github.com/etcd-conductor/etcd-conductor/test/s3server"
	conductortls "github.com/etcd-conductor/etcd-conductor/tls"
)

const (
	// envMeasure turns the measurement on.
	envMeasure = "ETCD_CONDUCTOR_MEASURE_MEMORY"
	// envJob names the job file of a child process.
	envJob = "ETCD_CONDUCTOR_MEMORY_JOB"
	// keyspaceMiB is the size of the values written; the database is somewhat larger.
	keyspaceMiB = 256
	// deltaMiB is the size of the values written after the full snapshot, into one delta.
	deltaMiB = 16
	bucket   = "memory"
	prefix   = "etcd-main"
)

// job is what a child does, written by the parent as JSON.
type job struct {
	Role   string // "full", "delta" or "restore"
	Member etcdclient.Target
	Client conductortls.ClientMaterial
	Secret map[string][]byte
	Dir    string
	// From is the first revision of a delta.
	From int64
}

// result is a child's report, one JSON line on its stdout.
type result struct {
	// PeakRSS is VmHWM: the most resident memory the process ever had (anonymous, file-backed
	// and shared); MaxRSS the same from getrusage, as a cross-check.
	PeakRSS, MaxRSS int64
	// PeakAnon is the highest RssAnon sampled every 10 ms: the memory only the process holds,
	// which the kernel cannot drop under a cgroup limit (file-backed pages it can).
	PeakAnon int64
	// HeapSys is what the Go runtime took from the OS for its heap, at the end.
	HeapSys uint64
	// Revision is the last revision a backup holds.
	Revision int64
	Detail   string
}

func TestMain(m *testing.M) {
	if path := os.Getenv(envJob); path != "" {
		os.Exit(child(path))
	}
	os.Exit(m.Run())
}

// TestPeakMemory fills a real etcd member with 256 MiB of values, then measures a full backup of
// it to a real S3 server (versitygw), a delta backup of 16 MiB more, and a restore of the two,
// each in a child process.
func TestPeakMemory(t *testing.T) {
	if os.Getenv(envMeasure) == "" {
		t.Skipf("writes and restores a 256 MiB keyspace; set %s=1 to measure", envMeasure)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	c := etcdtest.Start(t, etcdtest.Config{Members: 1})
	conn, err := c.Dial(0)
	if err != nil {
		t.Fatal(err)
	}
	kv := pb.NewKVClient(conn)
	fill(ctx, t, kv, "fill", keyspaceMiB)
	srv := s3server.StartT(t, "", bucket)
	base := job{Member: c.Members[0].Target(), Client: c.Client, Secret: srv.SecretData()}

	var full result
	for _, step := range []struct {
		role string
		// before runs in this process before the child.
		before func(*job)
	}{
		{"full", func(j *job) { j.Dir = t.TempDir() }},
		{"delta", func(j *job) {
			fill(ctx, t, kv, "delta", deltaMiB)
			j.From = full.Revision + 1
		}},
		{"restore", func(j *job) { j.Dir = filepath.Join(t.TempDir(), "new.etcd") }},
	} {
		t.Run(step.role, func(t *testing.T) {
			j := base
			j.Role = step.role
			step.before(&j)
			r := runChild(ctx, t, j)
			if step.role == "full" {
				full = r
			}
			t.Logf("%s (%d MiB keyspace, %d MiB delta): peak RSS %.1f MiB (getrusage %.1f MiB), peak anonymous %.1f MiB, Go heap %.1f MiB; %s",
				j.Role, keyspaceMiB, deltaMiB, mib(r.PeakRSS), mib(r.MaxRSS), mib(r.PeakAnon), mib(int64(r.HeapSys)), r.Detail)
		})
	}
}

// fill writes mb MiB of 4 KiB values under prefix, 64 keys a transaction (the restore
// benchmark's keyspace).
func fill(ctx context.Context, t *testing.T, kv pb.KVClient, prefix string, mb int) {
	t.Helper()
	value := bytes.Repeat([]byte("v"), 4096)
	n := mb * 256
	for i := 0; i < n; i += 64 {
		var ops []*pb.RequestOp
		for j := i; j < i+64 && j < n; j++ {
			ops = append(ops, &pb.RequestOp{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: fmt.Appendf(nil, "%s/%08d", prefix, j), Value: value}}})
		}
		if _, err := kv.Txn(ctx, &pb.TxnRequest{Success: ops}); err != nil {
			t.Fatalf("filling the keyspace: %v", err)
		}
	}
}

func runChild(ctx context.Context, t *testing.T, j job) result {
	t.Helper()
	raw, err := json.Marshal(j)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "job.json")
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envJob+"="+path)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s child: %v\n%s", j.Role, err, stderr.String())
	}
	var r result
	if err := json.Unmarshal(bytes.TrimSpace(stdout.Bytes()), &r); err != nil {
		t.Fatalf("%s child's report %q: %v\n%s", j.Role, stdout.String(), err, stderr.String())
	}
	return r
}

// child does the job and prints its result; the exit code says whether it worked.
func child(path string) int {
	raw, err := os.ReadFile(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var j job
	if err := json.Unmarshal(raw, &j); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	stop := sampleAnon()
	rev, detail, err := do(j)
	peakAnon := stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", j.Role, err)
		return 1
	}
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	out, _ := json.Marshal(result{PeakRSS: statusKiB("VmHWM") << 10, MaxRSS: ru.Maxrss << 10, PeakAnon: peakAnon, HeapSys: ms.HeapSys, Revision: rev, Detail: detail})
	fmt.Println(string(out))
	return 0
}

// do is the job itself, as the member-agent (full, delta) and the init step (restore) do it.
func do(j job) (int64, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	s, err := backupstore.New(backupstore.Config{Provider: "S3", Container: bucket, Prefix: prefix, Secret: j.Secret})
	if err != nil {
		return 0, "", err
	}
	store := backupstore.Retrying(s, backupstore.DefaultBackoff)
	if j.Role == "restore" {
		peer, err := etcdtest.FreePort("127.0.0.1")
		if err != nil {
			return 0, "", err
		}
		res, err := restore.FromStore(ctx, store, snapshot.Owner{}, restore.Options{DataDir: j.Dir, Name: "etcd-main-0",
			PeerURL: "http://127.0.0.1:" + strconv.Itoa(peer), Token: "measured", Log: logr.Discard()})
		if err != nil {
			return 0, "", err
		}
		return res.Revision, res.String(), nil
	}
	member, err := etcdclient.DialMember(j.Client, j.Member, etcdclient.Options{CallTimeout: 10 * time.Minute})
	if err != nil {
		return 0, "", err
	}
	defer member.Close()
	switch j.Role {
	case "full":
		snap, obj, err := backup.UploadFull(ctx, member, store, j.Dir, time.Now(), snapshot.CompressionNone)
		if err != nil {
			return 0, "", err
		}
		return snap.EndRevision, fmt.Sprintf("full snapshot at revision %d, %.1f MiB", snap.EndRevision, mib(obj.Size)), nil
	case "delta":
		// As the backup loop takes a delta (backup.Runner): the events since the last
		// snapshot with the keyspace counted at both ends, encoded in memory, uploaded.
		end, err := member.Revision(ctx)
		if err != nil {
			return 0, "", err
		}
		f, _, err := backup.BuildDelta(ctx, member, j.From, end, nil, nil)
		if err != nil {
			return 0, "", err
		}
		_, obj, err := backup.UploadDelta(ctx, store, f, time.Now(), snapshot.CompressionNone)
		if err != nil {
			return 0, "", err
		}
		return end, fmt.Sprintf("delta %d..%d, %d events, %.1f MiB", j.From, end, len(f.Events), mib(obj.Size)), nil
	}
	return 0, "", fmt.Errorf("unknown role %q", j.Role)
}

// sampleAnon samples RssAnon every 10 ms until the returned function is called, which returns
// the highest value seen, in bytes.
func sampleAnon() func() int64 {
	var mu sync.Mutex
	var peak int64
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			if v := statusKiB("RssAnon") << 10; v > 0 {
				mu.Lock()
				peak = max(peak, v)
				mu.Unlock()
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() int64 {
		close(done)
		<-stopped
		mu.Lock()
		defer mu.Unlock()
		return peak
	}
}

// statusKiB is a "Name:   123 kB" line of /proc/self/status, in KiB (0 when absent).
func statusKiB(name string) int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+":"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }
