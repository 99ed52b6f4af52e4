package compat

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
)

func TestIgnored(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec druidv1alpha1.EtcdSpec
		want []string
	}{
		{name: "nothing set", spec: druidv1alpha1.EtcdSpec{Replicas: 3}},
		{
			name: "acted-upon fields are not listed",
			spec: druidv1alpha1.EtcdSpec{Replicas: 3, Etcd: druidv1alpha1.EtcdConfig{
				Quota: nil, Metrics: ptr.To(druidv1alpha1.MetricsBasic), DefragmentationSchedule: ptr.To("0 * * * *"),
			}, SharedConfig: &druidv1alpha1.SharedConfig{AutoCompactionMode: ptr.To(druidv1alpha1.CompactionPeriodic)}},
		},
		{
			name: "backup fields the member-agent does not use are named, the others not",
			spec: druidv1alpha1.EtcdSpec{Backup: &druidv1alpha1.BackupSpec{
				Port:                    ptr.To(int32(8080)),
				DeltaSnapshotPeriod:     &metav1.Duration{},
				Store:                   &druidv1alpha1.StoreSpec{Prefix: "p", Provider: ptr.To(druidv1alpha1.StorageProvider("aws"))},
				FullSnapshotSchedule:    ptr.To("0 * * * *"),
				GarbageCollectionPolicy: ptr.To(druidv1alpha1.GarbageCollectionPolicy("LimitBased")),
				MaxBackupsLimitBasedGC:  ptr.To(int32(3)),
				GarbageCollectionPeriod: &metav1.Duration{},
				SnapshotCompression:     &druidv1alpha1.CompressionSpec{},
			}},
			want: []string{"spec.backup.port"},
		},
		{name: "empty backup names nothing", spec: druidv1alpha1.EtcdSpec{Backup: &druidv1alpha1.BackupSpec{}}},
		{
			name: "without a store provider every backup field is named",
			spec: druidv1alpha1.EtcdSpec{Backup: &druidv1alpha1.BackupSpec{
				FullSnapshotSchedule: ptr.To("0 * * * *"),
				Store:                &druidv1alpha1.StoreSpec{Prefix: "p"},
			}},
			want: []string{"spec.backup.fullSnapshotSchedule", "spec.backup.store"},
		},
		{
			name: "druid-only knobs",
			spec: druidv1alpha1.EtcdSpec{
				Selector:            &metav1.LabelSelector{},
				VolumeClaimTemplate: ptr.To("x"),
				RunAsRoot:           ptr.To(false),
				Etcd: druidv1alpha1.EtcdConfig{
					WrapperPort:   ptr.To(int32(9095)),
					AuthSecretRef: nil,
					AdditionalAdvertisePeerURLs: []druidv1alpha1.MemberPeerURLs{
						{MemberName: "etcd-main-0", URLs: []string{"https://10.0.0.1:2380"}},
					},
				},
			},
			want: []string{"spec.etcd.wrapperPort", "spec.runAsRoot", "spec.selector", "spec.volumeClaimTemplate"},
		},
		{
			// These act (or, when they cannot, refuse the Etcd in internal/operator/resources): listing
			// them as ignored would tell the user the opposite of what happens.
			name: "druid v0.35-v0.38 fields that act or refuse are not listed",
			spec: druidv1alpha1.EtcdSpec{
				MemberNamePrefix: ptr.To("p"),
				Etcd: druidv1alpha1.EtcdConfig{
					EnableGRPCGateway:        ptr.To(false),
					BackendBboltFreelistType: ptr.To(druidv1alpha1.BboltFreelistArray),
					PeerUrlTLS:               &druidv1alpha1.PeerTLSConfig{SkipClientSANVerification: ptr.To(false)},
					BootstrapWithExistingCluster: &druidv1alpha1.BootstrapWithExistingCluster{
						Members: []druidv1alpha1.BootstrapExistingMember{{Name: "src-0", PeerURLs: []string{"https://src-0:2380"}}},
					},
				},
			},
		},
		{
			name: "an empty additionalAdvertisePeerURLs names nothing",
			spec: druidv1alpha1.EtcdSpec{Etcd: druidv1alpha1.EtcdConfig{AdditionalAdvertisePeerURLs: []druidv1alpha1.MemberPeerURLs{}}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Ignored(&tc.spec)
			var paths []string
			for _, f := range got {
				paths = append(paths, f.Path)
				if f.Reason == "" {
					t.Errorf("%s has no reason", f.Path)
				}
			}
			if strings.Join(paths, ",") != strings.Join(tc.want, ",") {
				t.Errorf("ignored = %v, want %v", paths, tc.want)
			}
		})
	}
}

func TestSummary(t *testing.T) {
	if got := Summary(nil); got != "" {
		t.Errorf("Summary(nil) = %q, want empty", got)
	}
	got := Summary([]Field{
		{Path: "spec.backup.port", Reason: ReasonBackupSidecarOnly},
		{Path: "spec.backup.store", Reason: ReasonBackupSidecarOnly},
		{Path: "spec.selector", Reason: ReasonOwnSelector},
	})
	want := "3 field(s) accepted but ignored: spec.backup.port, spec.backup.store (" + ReasonBackupSidecarOnly + "); spec.selector (" + ReasonOwnSelector + ")"
	if got != want {
		t.Errorf("Summary = %q\nwant      %q", got, want)
	}
}
