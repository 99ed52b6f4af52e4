package resources

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
)

func quantity(s string) *resource.Quantity { q := resource.MustParse(s); return &q }

// checkEnvironment renders the etcd environment of a 3-member Etcd changed by mutate and checks
// the variables in want ("" means: absent).
func checkEnvironment(t *testing.T, mutate func(*druidv1alpha1.Etcd), want map[string]string) {
	t.Helper()
	e := testEtcd(3)
	mutate(e)
	env := EtcdEnvironment(e)
	for k, w := range want {
		if got, ok := env[k]; got != w || (w == "" && ok) {
			t.Errorf("%s = %q (set: %v), want %q", k, got, ok, w)
		}
	}
}

func TestSettingsReachTheEtcdEnvironment(t *testing.T) {
	for _, tt := range []struct {
		name   string
		mutate func(e *druidv1alpha1.Etcd)
		want   map[string]string // "" means: absent
	}{
		{
			name:   "defaults",
			mutate: func(*druidv1alpha1.Etcd) {},
			want: map[string]string{
				"ETCD_QUOTA_BACKEND_BYTES": "8589934592", "ETCD_SNAPSHOT_COUNT": "75000",
				"ETCD_METRICS": "", "ETCD_AUTO_COMPACTION_MODE": "periodic", "ETCD_AUTO_COMPACTION_RETENTION": "30m",
			},
		},
		{
			name: "every setting",
			mutate: func(e *druidv1alpha1.Etcd) {
				e.Spec.Etcd.Quota = quantity("2Gi")
				e.Spec.Etcd.SnapshotCount = ptr.To(int64(1000))
				e.Spec.Etcd.Metrics = ptr.To(druidv1alpha1.MetricsExtensive)
				e.Spec.SharedConfig = &druidv1alpha1.SharedConfig{
					AutoCompactionMode:      ptr.To(druidv1alpha1.CompactionRevision),
					AutoCompactionRetention: ptr.To("1000"),
				}
			},
			want: map[string]string{
				"ETCD_QUOTA_BACKEND_BYTES": "2147483648", "ETCD_SNAPSHOT_COUNT": "1000", "ETCD_METRICS": "extensive",
				"ETCD_AUTO_COMPACTION_MODE": "revision", "ETCD_AUTO_COMPACTION_RETENTION": "1000",
			},
		},
	} {
		t.Run(tt.name, func(t *testing.T) { checkEnvironment(t, tt.mutate, tt.want) })
	}
}

// A setting change is a configuration change, and so a pod template change the update strategy
// rolls out.
func TestSettingChangeChangesThePodTemplate(t *testing.T) {
	base := testEtcd(3)
	before, err := StatefulSet(base, Settings{})
	if err != nil {
		t.Fatal(err)
	}
	for name, mutate := range map[string]func(e *druidv1alpha1.Etcd){
		"quota":   func(e *druidv1alpha1.Etcd) { e.Spec.Etcd.Quota = quantity("1Gi") },
		"metrics": func(e *druidv1alpha1.Etcd) { e.Spec.Etcd.Metrics = ptr.To(druidv1alpha1.MetricsExtensive) },
		"compaction": func(e *druidv1alpha1.Etcd) {
			e.Spec.SharedConfig = &druidv1alpha1.SharedConfig{AutoCompactionRetention: ptr.To("1h")}
		},
		"heartbeat": func(e *druidv1alpha1.Etcd) {
			e.Spec.Etcd.HeartbeatDuration = &metav1.Duration{Duration: 5 * time.Second}
		},
		"priority class": func(e *druidv1alpha1.Etcd) { e.Spec.PriorityClassName = ptr.To("critical") },
		"resources": func(e *druidv1alpha1.Etcd) {
			e.Spec.Etcd.Resources = &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}
		},
		"scheduling": func(e *druidv1alpha1.Etcd) {
			e.Spec.SchedulingConstraints = &druidv1alpha1.SchedulingConstraints{Affinity: &corev1.Affinity{}}
		},
		"topology spreading": func(e *druidv1alpha1.Etcd) { e.Spec.SchedulingConstraints = spread() },
	} {
		t.Run(name, func(t *testing.T) {
			e := base.DeepCopy()
			mutate(e)
			after, err := StatefulSet(e, Settings{})
			if err != nil {
				t.Fatal(err)
			}
			if equality.Semantic.DeepEqual(before.Spec.Template, after.Spec.Template) {
				t.Errorf("changing %s left the pod template unchanged", name)
			}
		})
	}
}

func spread() *druidv1alpha1.SchedulingConstraints {
	return &druidv1alpha1.SchedulingConstraints{TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{
		MaxSkew: 1, TopologyKey: "topology.kubernetes.io/zone", WhenUnsatisfiable: corev1.DoNotSchedule,
	}}}
}

func TestSchedulingConstraintsReachThePods(t *testing.T) {
	e := testEtcd(3)
	e.Spec.SchedulingConstraints = spread()
	e.Spec.SchedulingConstraints.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{TopologyKey: "kubernetes.io/hostname"}},
	}}
	sts, err := StatefulSet(e, Settings{})
	if err != nil {
		t.Fatal(err)
	}
	pod := sts.Spec.Template.Spec
	if pod.Affinity == nil || pod.Affinity.PodAntiAffinity == nil || len(pod.TopologySpreadConstraints) != 1 {
		t.Fatalf("affinity %+v, topology spread %+v: want the Etcd's", pod.Affinity, pod.TopologySpreadConstraints)
	}
	// The pod spec holds copies: editing it must not write through to the Etcd.
	pod.TopologySpreadConstraints[0].MaxSkew = 9
	if e.Spec.SchedulingConstraints.TopologySpreadConstraints[0].MaxSkew != 1 {
		t.Error("the pod template shares the Etcd's topology spread constraints")
	}
}

func TestHeartbeatDuration(t *testing.T) {
	for _, tt := range []struct {
		name         string
		heartbeat    *metav1.Duration
		operator     string
		wantInterval string
		wantLease    int32
	}{
		{name: "defaults", wantInterval: "2s", wantLease: LeaseDurationSeconds},
		{name: "operator setting", operator: "1s", wantInterval: "1s", wantLease: LeaseDurationSeconds},
		{name: "etcd-druid's 10s stretches the lease", heartbeat: &metav1.Duration{Duration: 10 * time.Second}, operator: "1s", wantInterval: "10s", wantLease: 30},
		{name: "short heartbeat keeps the minimum lease", heartbeat: &metav1.Duration{Duration: 3 * time.Second}, wantInterval: "3s", wantLease: LeaseDurationSeconds},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := testEtcd(3)
			e.Spec.Etcd.HeartbeatDuration = tt.heartbeat
			sts, err := StatefulSet(e, Settings{MemberAgentInterval: tt.operator})
			if err != nil {
				t.Fatal(err)
			}
			args := strings.Join(sts.Spec.Template.Spec.Containers[1].Args, " ")
			if !strings.Contains(args, "--interval="+tt.wantInterval) {
				t.Errorf("member-agent args %q, want --interval=%s", args, tt.wantInterval)
			}
			if got := *MemberLease(e, "etcd-main-0").Spec.LeaseDurationSeconds; got != tt.wantLease {
				t.Errorf("lease duration %ds, want %ds", got, tt.wantLease)
			}
		})
	}
}

func TestClientServiceCustomisation(t *testing.T) {
	e := testEtcd(3)
	e.Spec.Etcd.ClientService = &druidv1alpha1.ClientService{
		Annotations:         map[string]string{"team": "storage"},
		Labels:              map[string]string{"tier": "client", LabelInstance: "hijack"},
		TrafficDistribution: ptr.To("PreferClose"),
	}
	svc := ClientService(e)
	if svc.Annotations["team"] != "storage" || svc.Labels["tier"] != "client" {
		t.Errorf("labels %v annotations %v: want the clientService's", svc.Labels, svc.Annotations)
	}
	if svc.Labels[LabelInstance] != e.Name {
		t.Errorf("a clientService label replaced the operator's %s label: %q", LabelInstance, svc.Labels[LabelInstance])
	}
	if svc.Spec.TrafficDistribution == nil || *svc.Spec.TrafficDistribution != "PreferClose" {
		t.Errorf("trafficDistribution %v, want PreferClose", svc.Spec.TrafficDistribution)
	}
	if PeerService(e).Annotations["team"] != "" {
		t.Error("clientService annotations leaked onto the peer Service")
	}
}

func TestValidateSettings(t *testing.T) {
	for _, tt := range []struct {
		name     string
		mutate   func(e *druidv1alpha1.Etcd)
		wantCode string
	}{
		{name: "druid sample settings", mutate: func(e *druidv1alpha1.Etcd) {
			e.Spec.Etcd.Quota = quantity("8Gi")
			e.Spec.Etcd.Metrics = ptr.To(druidv1alpha1.MetricsBasic)
			e.Spec.Etcd.DefragmentationSchedule = ptr.To("0 */24 * * *")
			e.Spec.SharedConfig = &druidv1alpha1.SharedConfig{AutoCompactionMode: ptr.To(druidv1alpha1.CompactionPeriodic), AutoCompactionRetention: ptr.To("30m")}
		}},
		{name: "periodic retention in hours", mutate: func(e *druidv1alpha1.Etcd) {
			e.Spec.SharedConfig = &druidv1alpha1.SharedConfig{AutoCompactionRetention: ptr.To("5")}
		}},
		{name: "cron descriptor", mutate: func(e *druidv1alpha1.Etcd) { e.Spec.Etcd.DefragmentationSchedule = ptr.To("@daily") }},
		{name: "invalid cron", mutate: func(e *druidv1alpha1.Etcd) { e.Spec.Etcd.DefragmentationSchedule = ptr.To("0 */24 * *") }, wantCode: ErrInvalidDefragmentationSchedule},
		{name: "cron out of range", mutate: func(e *druidv1alpha1.Etcd) { e.Spec.Etcd.DefragmentationSchedule = ptr.To("61 * * * *") }, wantCode: ErrInvalidDefragmentationSchedule},
		{name: "unknown metrics level", mutate: func(e *druidv1alpha1.Etcd) { e.Spec.Etcd.Metrics = ptr.To(druidv1alpha1.MetricsLevel("verbose")) }, wantCode: ErrInvalidMetrics},
		{name: "zero quota", mutate: func(e *druidv1alpha1.Etcd) { e.Spec.Etcd.Quota = quantity("0") }, wantCode: ErrInvalidQuota},
		{name: "quota beyond the volume", mutate: func(e *druidv1alpha1.Etcd) {
			e.Spec.Etcd.Quota = quantity("8Gi")
			e.Spec.StorageCapacity = quantity("4Gi")
		}, wantCode: ErrInvalidQuota},
		{name: "unknown compaction mode", mutate: func(e *druidv1alpha1.Etcd) {
			e.Spec.SharedConfig = &druidv1alpha1.SharedConfig{AutoCompactionMode: ptr.To(druidv1alpha1.CompactionMode("hourly"))}
		}, wantCode: ErrInvalidCompaction},
		{name: "revision retention not a number", mutate: func(e *druidv1alpha1.Etcd) {
			e.Spec.SharedConfig = &druidv1alpha1.SharedConfig{AutoCompactionMode: ptr.To(druidv1alpha1.CompactionRevision), AutoCompactionRetention: ptr.To("30m")}
		}, wantCode: ErrInvalidCompaction},
		{name: "periodic retention garbage", mutate: func(e *druidv1alpha1.Etcd) {
			e.Spec.SharedConfig = &druidv1alpha1.SharedConfig{AutoCompactionRetention: ptr.To("soon")}
		}, wantCode: ErrInvalidCompaction},
		{name: "heartbeat too short", mutate: func(e *druidv1alpha1.Etcd) {
			e.Spec.Etcd.HeartbeatDuration = &metav1.Duration{Duration: 10 * time.Millisecond}
		}, wantCode: ErrInvalidDuration},
		{name: "zero defrag timeout", mutate: func(e *druidv1alpha1.Etcd) { e.Spec.Etcd.EtcdDefragTimeout = &metav1.Duration{} }, wantCode: ErrInvalidDuration},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := testEtcd(3)
			tt.mutate(e)
			problems := ValidateSpec(e)
			switch {
			case tt.wantCode == "" && len(problems) > 0:
				t.Errorf("unexpected problems: %v", problems)
			case tt.wantCode != "" && (len(problems) != 1 || problems[0].Code != tt.wantCode):
				t.Errorf("problems %v, want exactly one %s", problems, tt.wantCode)
			}
		})
	}
}
