package resources_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/etcd-conductor/etcd-conductor/etcdclient/etcdtest"
	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
)

// These tests start real etcd members with the ETCD_* variables the Etcd's ConfigMap carries for
// its settings, and check that etcd acts on them.

func druidEtcd(mutate func(e *druidv1alpha1.Etcd)) *druidv1alpha1.Etcd {
	ref := corev1.SecretReference{Name: "x"}
	tlsCfg := &druidv1alpha1.TLSConfig{TLSCASecretRef: druidv1alpha1.SecretReference{SecretReference: ref}, ServerTLSSecretRef: ref, ClientTLSSecretRef: ref}
	e := &druidv1alpha1.Etcd{
		ObjectMeta: metav1.ObjectMeta{Name: "etcd-test", Namespace: "default"},
		Spec:       druidv1alpha1.EtcdSpec{Replicas: 1, Etcd: druidv1alpha1.EtcdConfig{ClientUrlTLS: tlsCfg, PeerUrlTLS: &druidv1alpha1.PeerTLSConfig{TLSConfig: *tlsCfg}}},
	}
	mutate(e)
	return e
}

func startWithSettings(t *testing.T, e *druidv1alpha1.Etcd) *etcdtest.Cluster {
	t.Helper()
	if problems := resources.ValidateSpec(e); len(problems) > 0 {
		t.Fatalf("the Etcd under test is invalid: %v", problems)
	}
	if _, err := etcdtest.EtcdBinary(etcdtest.DefaultVersion); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal(err)
		}
		t.Skipf("etcd binary not built: %v", err)
	}
	var env []string
	for k, v := range resources.SettingsEnvironment(e) {
		env = append(env, k+"="+v)
	}
	return etcdtest.Start(t, etcdtest.Config{Members: int(e.Spec.Replicas), Env: env})
}

type memberAPI struct {
	kv    pb.KVClient
	maint pb.MaintenanceClient
}

func dial(t *testing.T, c *etcdtest.Cluster, i int) memberAPI {
	t.Helper()
	cc, err := c.Dial(i)
	if err != nil {
		t.Fatal(err)
	}
	return memberAPI{kv: pb.NewKVClient(cc), maint: pb.NewMaintenanceClient(cc)}
}

func TestQuotaRaisesNoSpaceOnTheMember(t *testing.T) {
	e := druidEtcd(func(e *druidv1alpha1.Etcd) { q := resource.MustParse("1Mi"); e.Spec.Etcd.Quota = &q })
	c := startWithSettings(t, e)
	api := dial(t, c, 0)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	value := make([]byte, 64<<10)
	var putErr error
	puts := 0
	// 1 MiB of quota holds at most 16 such values. etcd checks the quota against the backend
	// file, which grows on commits (every 100 ms), so it notices some puts late; 256 puts are
	// 16 MiB, far below the 8 GiB default that an ignored setting would leave.
	for ; puts < 256 && putErr == nil; puts++ {
		_, putErr = api.kv.Put(ctx, &pb.PutRequest{Key: fmt.Appendf(nil, "fill-%03d", puts), Value: value})
		time.Sleep(5 * time.Millisecond)
	}
	if putErr == nil || !strings.Contains(putErr.Error(), "database space exceeded") {
		log, _ := os.ReadFile(c.Members[0].LogFile)
		t.Fatalf("after %d puts of 64 KiB into a 1 MiB quota: error %v, want database space exceeded\n%s", puts, putErr, log)
	}
	alarms, err := api.maint.Alarm(ctx, &pb.AlarmRequest{Action: pb.AlarmRequest_GET})
	if err != nil {
		t.Fatal(err)
	}
	var raised []string
	for _, a := range alarms.GetAlarms() {
		raised = append(raised, a.GetAlarm().String())
	}
	if !strings.Contains(strings.Join(raised, ","), "NOSPACE") {
		t.Fatalf("alarms %v after exceeding the quota, want NOSPACE", raised)
	}
	t.Logf("quota 1Mi: put %d x 64 KiB, then %q, alarms %v", puts-1, putErr, raised)
}

func TestAutoCompactionCompactsOldRevisions(t *testing.T) {
	e := druidEtcd(func(e *druidv1alpha1.Etcd) {
		e.Spec.SharedConfig = &druidv1alpha1.SharedConfig{
			AutoCompactionMode:      ptr.To(druidv1alpha1.CompactionPeriodic),
			AutoCompactionRetention: ptr.To("2s"),
		}
	})
	c := startWithSettings(t, e)
	api := dial(t, c, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	first, err := api.kv.Put(ctx, &pb.PutRequest{Key: []byte("k"), Value: []byte("0")})
	if err != nil {
		t.Fatal(err)
	}
	oldRev := first.GetHeader().GetRevision()
	start := time.Now()
	for i := 1; ; i++ {
		// Keep writing: periodic compaction compacts to the revision of retention ago.
		if _, err := api.kv.Put(ctx, &pb.PutRequest{Key: []byte("k"), Value: fmt.Appendf(nil, "%d", i)}); err != nil {
			t.Fatal(err)
		}
		_, err := api.kv.Range(ctx, &pb.RangeRequest{Key: []byte("k"), Revision: oldRev})
		if err != nil && strings.Contains(err.Error(), "compacted") {
			t.Logf("revision %d compacted after %s", oldRev, time.Since(start).Round(100*time.Millisecond))
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("revision %d still readable after %s with periodic auto-compaction of 2s", oldRev, time.Since(start))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func TestMetricsLevelReachesTheMember(t *testing.T) {
	const histogram = "grpc_server_handling_seconds_bucket"
	for _, tt := range []struct {
		level         druidv1alpha1.MetricsLevel
		wantHistogram bool
	}{{druidv1alpha1.MetricsBasic, false}, {druidv1alpha1.MetricsExtensive, true}} {
		t.Run(string(tt.level), func(t *testing.T) {
			c := startWithSettings(t, druidEtcd(func(e *druidv1alpha1.Etcd) { e.Spec.Etcd.Metrics = ptr.To(tt.level) }))
			api := dial(t, c, 0)
			// One gRPC call, so the handling histogram has something to show.
			if _, err := api.kv.Range(context.Background(), &pb.RangeRequest{Key: []byte("k")}); err != nil {
				t.Fatal(err)
			}
			body, err := scrape(c)
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Contains(body, histogram); got != tt.wantHistogram {
				t.Errorf("metrics %s: %s present = %v, want %v", tt.level, histogram, got, tt.wantHistogram)
			}
		})
	}
}

func scrape(c *etcdtest.Cluster) (string, error) {
	m := c.Members[0]
	cfg, err := c.Client.Config(m.ServerName)
	if err != nil {
		return "", err
	}
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
	resp, err := hc.Get(m.ClientURL + "/metrics")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", errors.New("GET /metrics: " + resp.Status)
	}
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}
