package resources

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
)

// TestOurContainersNameNoCommand: the member pod's containers that run the operator's image
// (member-init, member-agent) set args only, so the image's ENTRYPOINT runs whatever path the
// image keeps the binary at; a command here would tie every member pod to one image layout
// (issue #29: an image with the binary elsewhere broke the sidecars). Their first arg picks the
// binary's role.
func TestOurContainersNameNoCommand(t *testing.T) {
	const image = "registry.example/etcd-conductor:x"
	for _, tc := range []struct {
		name string
		etcd func() *druidv1alpha1.Etcd
	}{
		{"TLS", func() *druidv1alpha1.Etcd { return testEtcd(3) }},
		{"plain HTTP", func() *druidv1alpha1.Etcd {
			e := testEtcd(1)
			e.Spec.Etcd.ClientUrlTLS, e.Spec.Etcd.PeerUrlTLS = nil, nil
			return e
		}},
		{"backups", func() *druidv1alpha1.Etcd { return localEtcd("shoot", "etcd-main") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sts, err := StatefulSet(tc.etcd(), Settings{MemberAgentImage: image})
			if err != nil {
				t.Fatal(err)
			}
			spec := sts.Spec.Template.Spec
			ours := 0
			for _, c := range append(append([]corev1.Container{}, spec.InitContainers...), spec.Containers...) {
				if c.Image != image {
					continue
				}
				ours++
				if len(c.Command) != 0 {
					t.Errorf("container %s sets command %q: the image's entrypoint must run", c.Name, c.Command)
				}
				if len(c.Args) == 0 || c.Args[0] != "member-agent" {
					t.Errorf("container %s: args %q, want the role member-agent first", c.Name, c.Args)
				}
			}
			if ours != 2 {
				t.Errorf("%d containers run the operator's image, want member-init and member-agent", ours)
			}
		})
	}
}
