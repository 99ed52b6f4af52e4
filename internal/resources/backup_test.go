package resources

import (
	"strings"
	"testing"

	"k8s.io/utils/ptr"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
)

// backedUp is testEtcd with an S3 store and spec.backup.compression as given.
func backedUp(compression *druidv1alpha1.CompressionSpec) *druidv1alpha1.Etcd {
	e := testEtcd(3)
	e.Spec.Backup = &druidv1alpha1.BackupSpec{
		Store:               &druidv1alpha1.StoreSpec{Provider: ptr.To(druidv1alpha1.StorageProvider("S3")), Container: ptr.To("bucket"), Prefix: "p"},
		SnapshotCompression: compression,
	}
	return e
}

func policy(p string) *druidv1alpha1.CompressionPolicy {
	return ptr.To(druidv1alpha1.CompressionPolicy(p))
}

func TestCompressionReachesTheMemberAgent(t *testing.T) {
	for _, tc := range []struct {
		name        string
		compression *druidv1alpha1.CompressionSpec
		want        string // the --compression-policy value, "" for no flag
	}{
		{name: "unset: none", compression: nil},
		{name: "enabled unset: none (etcd-druid would gzip)", compression: &druidv1alpha1.CompressionSpec{Policy: policy("lzw")}},
		{name: "disabled", compression: &druidv1alpha1.CompressionSpec{Enabled: ptr.To(false), Policy: policy("zlib")}},
		{name: "enabled without a policy: gzip, etcd-druid's default", compression: &druidv1alpha1.CompressionSpec{Enabled: ptr.To(true)}, want: "gzip"},
		{name: "gzip", compression: &druidv1alpha1.CompressionSpec{Enabled: ptr.To(true), Policy: policy("gzip")}, want: "gzip"},
		{name: "lzw", compression: &druidv1alpha1.CompressionSpec{Enabled: ptr.To(true), Policy: policy("lzw")}, want: "lzw"},
		{name: "zlib", compression: &druidv1alpha1.CompressionSpec{Enabled: ptr.To(true), Policy: policy("zlib")}, want: "zlib"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sts, err := StatefulSet(backedUp(tc.compression), Settings{})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, c := range sts.Spec.Template.Spec.Containers {
				if c.Name != MemberAgentContainerName {
					continue
				}
				for _, a := range c.Args {
					if v, ok := strings.CutPrefix(a, "--compression-policy="); ok {
						got = append(got, v)
					}
				}
			}
			switch {
			case tc.want == "" && len(got) > 0:
				t.Errorf("member-agent has --compression-policy=%v, want no flag", got)
			case tc.want != "" && (len(got) != 1 || got[0] != tc.want):
				t.Errorf("member-agent has --compression-policy=%v, want %s", got, tc.want)
			}
		})
	}
}

func TestValidateCompression(t *testing.T) {
	for _, tc := range []struct {
		name        string
		compression *druidv1alpha1.CompressionSpec
		bad         bool
	}{
		{name: "unset", compression: nil},
		{name: "empty", compression: &druidv1alpha1.CompressionSpec{}},
		{name: "each policy", compression: &druidv1alpha1.CompressionSpec{Enabled: ptr.To(true), Policy: policy("zlib")}},
		{name: "unknown policy", compression: &druidv1alpha1.CompressionSpec{Enabled: ptr.To(true), Policy: policy("bzip2")}, bad: true},
		{name: "unknown policy while disabled", compression: &druidv1alpha1.CompressionSpec{Enabled: ptr.To(false), Policy: policy("xz")}, bad: true},
		{name: "policies are lower case", compression: &druidv1alpha1.CompressionSpec{Enabled: ptr.To(true), Policy: policy("GZIP")}, bad: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			problems := ValidateSpec(backedUp(tc.compression))
			switch {
			case !tc.bad && len(problems) > 0:
				t.Errorf("unexpected problems: %v", problems)
			case tc.bad && (len(problems) != 1 || problems[0].Code != ErrInvalidBackup || !strings.Contains(problems[0].Message, "spec.backup.compression.policy")):
				t.Errorf("problems %v, want one %s naming spec.backup.compression.policy", problems, ErrInvalidBackup)
			}
		})
	}
}
