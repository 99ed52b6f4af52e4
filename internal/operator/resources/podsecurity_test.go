package resources

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/etcd-conductor/etcd-conductor/test/podsecurity"
)

// restrictedViolations runs the PodSecurity admission plugin's own evaluator (the checks the
// apiserver applies to a namespace labelled enforce: restricted) on a pod template.
func restrictedViolations(t *testing.T, template corev1.PodTemplateSpec) []string {
	t.Helper()
	violations, err := podsecurity.RestrictedViolations(&template.ObjectMeta, &template.Spec)
	if err != nil {
		t.Fatal(err)
	}
	return violations
}

func TestPodTemplatePassesRestrictedPodSecurity(t *testing.T) {
	sts, err := StatefulSet(testEtcd(3), Settings{UpdateStrategy: appsv1.OnDeleteStatefulSetStrategyType, MemberAgentImage: "conductor:test"})
	if err != nil {
		t.Fatal(err)
	}
	if v := restrictedViolations(t, sts.Spec.Template); len(v) != 0 {
		t.Errorf("member pod template violates the restricted Pod Security Standard:\n%v", v)
	}

	// The evaluator is not vacuous: the same template without security contexts fails it.
	bare := sts.Spec.Template.DeepCopy()
	bare.Spec.SecurityContext = nil
	for i := range bare.Spec.Containers {
		bare.Spec.Containers[i].SecurityContext = nil
	}
	if v := restrictedViolations(t, *bare); len(v) == 0 {
		t.Error("a template without security contexts passed the restricted check: the evaluator checks nothing")
	}
}

func TestOnlyTheMemberAgentHoldsTheToken(t *testing.T) {
	sts, err := StatefulSet(testEtcd(3), Settings{MemberAgentImage: "conductor:test"})
	if err != nil {
		t.Fatal(err)
	}
	spec := sts.Spec.Template.Spec
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		t.Error("automountServiceAccountToken must be false: admission would mount the token into every container")
	}
	var tokenVolumes []string
	for _, v := range spec.Volumes {
		if v.Projected == nil {
			continue
		}
		for _, src := range v.Projected.Sources {
			if src.ServiceAccountToken != nil {
				tokenVolumes = append(tokenVolumes, v.Name)
			}
		}
	}
	if len(tokenVolumes) != 1 {
		t.Fatalf("token volumes = %v, want exactly one", tokenVolumes)
	}
	for _, c := range spec.Containers {
		mounted := false
		for _, m := range c.VolumeMounts {
			if m.Name == tokenVolumes[0] {
				mounted = true
				if m.MountPath != serviceAccountMountPath || !m.ReadOnly {
					t.Errorf("%s mounts the token at %s (readOnly %t), want %s read-only", c.Name, m.MountPath, m.ReadOnly, serviceAccountMountPath)
				}
			}
		}
		if want := c.Name == MemberAgentContainerName; mounted != want {
			t.Errorf("container %s: token mounted = %t, want %t", c.Name, mounted, want)
		}
		if sc := c.SecurityContext; sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			t.Errorf("container %s: root filesystem is writable", c.Name)
		}
	}
	if sc := spec.SecurityContext; sc == nil || sc.FSGroup == nil || *sc.FSGroup != MemberUID || sc.RunAsUser == nil || *sc.RunAsUser == 0 {
		t.Errorf("pod securityContext = %+v, want a non-root user and fsGroup %d for the data volume", sc, MemberUID)
	}
}
