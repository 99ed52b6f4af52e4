package resources

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/etcd-conductor/etcd-conductor/internal/store/backupstore"
)

// restoreStoreFlags are the member-agent's backup flags that name the store (every one of
// backupstore.Flags, so a store setting added there cannot miss the init step); the init step
// takes the same, to restore from it when the operator asks (internal/operator/controller/recovery).
var restoreStoreFlags = func() []string {
	var prefixes []string
	for _, name := range backupstore.FlagNames() {
		prefixes = append(prefixes, "--"+name+"=")
	}
	return prefixes
}()

// applyRestore gives the member init step the backup store the member-agent was given (its store
// flags, and the volumes those flags name, read-only): one source for both, so they never read
// different stores. Without backups the init step gets nothing and never restores.
func applyRestore(pod *corev1.PodSpec) {
	agent := containerNamed(pod.Containers, MemberAgentContainerName)
	init := containerNamed(pod.InitContainers, MemberInitContainerName)
	if agent == nil || init == nil {
		return
	}
	var flags []string
	for _, a := range agent.Args {
		if slices.ContainsFunc(restoreStoreFlags, func(p string) bool { return strings.HasPrefix(a, p) }) {
			flags = append(flags, a)
		}
	}
	if len(flags) == 0 {
		return
	}
	// Before "--": what follows are etcd's flags.
	at := slices.Index(init.Args, "--")
	if at < 0 {
		at = len(init.Args)
	}
	init.Args = slices.Concat(init.Args[:at:at], flags, init.Args[at:])
	for _, m := range agent.VolumeMounts {
		for _, f := range flags {
			if _, dir, _ := strings.Cut(f, "="); dir == m.MountPath {
				m.ReadOnly = true
				init.VolumeMounts = append(init.VolumeMounts, m)
			}
		}
	}
}

func containerNamed(cs []corev1.Container, name string) *corev1.Container {
	for i := range cs {
		if cs[i].Name == name {
			return &cs[i]
		}
	}
	return nil
}
