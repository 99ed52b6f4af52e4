package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
	"github.com/etcd-conductor/etcd-conductor/test/framework"
	scenariopkg "github.com/etcd-conductor/etcd-conductor/test/scenario"
	"github.com/etcd-conductor/etcd-conductor/test/workload"
)

// TestSettingsChangeRollsOutAndReachesMembers changes etcd-druid's etcd settings of a running
// 3-member cluster (quota, metrics level, auto-compaction) under the writer. The change is a
// template change: the OnDelete controller rolls it out with no acknowledged write lost. Then the
// running members show the settings: extensive metrics are served, and filling past the 4 MiB
// quota raises NOSPACE.
func TestSettingsChangeRollsOutAndReachesMembers(t *testing.T) {
	s := sharedStack(t)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	image := framework.EtcdImage(fromVersion)
	cluster, e := startCluster(ctx, t, s, "e2e-settings-")
	before, err := cluster.State(ctx)
	if err != nil {
		t.Fatal(err)
	}

	rec := startRecorder(ctx, t, cluster, 3)
	time.Sleep(time.Second)
	etcd, err := cluster.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	quota := resource.MustParse("4Mi")
	etcd.Spec.Etcd.Quota = &quota
	etcd.Spec.Etcd.Metrics = ptr.To(druidv1alpha1.MetricsExtensive)
	etcd.Spec.SharedConfig = &druidv1alpha1.SharedConfig{AutoCompactionMode: ptr.To(druidv1alpha1.CompactionPeriodic), AutoCompactionRetention: ptr.To("5s")}
	changed := time.Now()
	if err := s.Client.Update(ctx, etcd); err != nil {
		t.Fatal(err)
	}
	e.waitFor(ctx, "a new update revision", func(ctx context.Context) (bool, error) {
		st, err := cluster.State(ctx)
		return err == nil && st.UpdateRevision != "" && st.UpdateRevision != before.UpdateRevision, err
	})
	if err := cluster.WaitConverged(ctx, image); err != nil {
		t.Fatalf("settings rollout did not complete: %v", err)
	}
	rollout := time.Since(changed)
	time.Sleep(time.Second)
	report, recErr := rec.Stop(ctx)
	t.Logf("figures settings: rollout=%s %s", rollout.Round(100*time.Millisecond), report.Summary())
	fmt.Printf("e2e %-28s rollout=%-6s quorumLossMs=%-6d longestWriteGapMs=%-6d failedWrites=%-4d ackedWrites=%-5d lost=%d leaderChanges=%d\n",
		"settings-change", rollout.Round(100*time.Millisecond), report.QuorumLossMs, report.LongestWriteGapMs, report.FailedWrites,
		report.AckedWrites, report.LostAckedWrites, report.LeaderChanges)
	checkWrites(t, report, recErr)
	if report.LinearizabilityError != "" {
		t.Errorf("history not linearizable: %s", report.LinearizabilityError)
	}
	// A settings change is a template change rolled out like an image bump: the same promise.
	checkPromise(t, scenariopkg.Handover, report)

	eps := cluster.Endpoints()()
	if len(eps) != 3 {
		t.Fatalf("endpoints %+v, want 3", eps)
	}
	for _, ep := range eps {
		body, err := scrapeMetrics(ctx, ep)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(body, "grpc_server_handling_seconds_bucket") {
			t.Errorf("member %s serves no gRPC handling histogram: metrics level extensive did not reach it", ep.Name)
		}
	}

	// Fill past the quota through one member: etcd must refuse with NOSPACE.
	cc := dialMember(t, eps[0], cluster.PKI.ClientMaterial().Config)
	kv, maint := pb.NewKVClient(cc), pb.NewMaintenanceClient(cc)
	value := make([]byte, 64<<10)
	var putErr error
	puts := 0
	for ; puts < 512 && putErr == nil; puts++ { // 32 MiB at most, far below the 8 GiB default
		_, putErr = kv.Put(ctx, &pb.PutRequest{Key: fmt.Appendf(nil, "fill/%04d", puts), Value: value})
	}
	if putErr == nil || !strings.Contains(putErr.Error(), "database space exceeded") {
		t.Fatalf("after %d puts of 64 KiB into a 4 MiB quota: %v, want database space exceeded", puts, putErr)
	}
	alarms, err := maint.Alarm(ctx, &pb.AlarmRequest{Action: pb.AlarmRequest_GET})
	if err != nil {
		t.Fatal(err)
	}
	if len(alarms.GetAlarms()) == 0 || alarms.GetAlarms()[0].GetAlarm() != pb.AlarmType_NOSPACE {
		t.Fatalf("alarms %v after filling past the quota, want NOSPACE", alarms.GetAlarms())
	}
	t.Logf("quota 4Mi: %d puts of 64 KiB, then %v; alarms %v", puts-1, putErr, alarms.GetAlarms())
}

// scrapeMetrics reads a member's plain-HTTP metrics listener (pod IP, port 2381).
func scrapeMetrics(ctx context.Context, ep workload.Endpoint) (string, error) {
	host, _, err := net.SplitHostPort(ep.Address)
	if err != nil {
		return "", err
	}
	url := "http://" + net.JoinHostPort(host, strconv.Itoa(int(resources.MetricsPort))) + "/metrics"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		return "", fmt.Errorf("GET %s: %w", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return string(b), nil
}
