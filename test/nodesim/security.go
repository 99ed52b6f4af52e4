package nodesim

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"

	corev1 "k8s.io/api/core/v1"
)

// The security context as kubelet and the container runtime apply it, for what shows whether a
// pod really runs unprivileged: the process's user, group and supplementary groups (runAsUser,
// runAsGroup, supplementalGroups, fsGroup), runAsNonRoot refused for a root user, no_new_privs
// (allowPrivilegeEscalation: false), the capability bounding set (capabilities.drop), a read-only
// root filesystem, and fsGroup ownership of volumes. Host-binary images run as root unless
// runAsUser says otherwise, like an image without a USER; an OCI image as its USER.

// containerSecurity is what the runtime applies to one container's process.
type containerSecurity struct {
	// changeUser is false when the process keeps the simulator's root identity.
	changeUser   bool
	uid, gid     int64
	groups       []int64
	noNewPrivs   bool
	dropCaps     []string // setpriv bounding-set names, "all" for ALL
	readOnlyRoot bool
}

// imageIdentity is the user and group an image runs as when the securityContext names none:
// an OCI image's USER, root for every host-binary image (an image without a USER).
type imageIdentity struct{ uid, gid int64 }

// securityFor merges the pod's and the container's securityContext, container first, and
// refuses what kubelet refuses before creating the container.
func securityFor(pod *corev1.Pod, spec *corev1.Container, image imageIdentity) (containerSecurity, error) {
	psc := pod.Spec.SecurityContext
	if psc == nil {
		psc = &corev1.PodSecurityContext{}
	}
	csc := spec.SecurityContext
	if csc == nil {
		csc = &corev1.SecurityContext{}
	}
	pick := func(c, p *int64) *int64 {
		if c != nil {
			return c
		}
		return p
	}
	var out containerSecurity
	uid := pick(csc.RunAsUser, psc.RunAsUser)
	gid := pick(csc.RunAsGroup, psc.RunAsGroup)
	nonRoot := csc.RunAsNonRoot
	if nonRoot == nil {
		nonRoot = psc.RunAsNonRoot
	}
	out.uid, out.gid = image.uid, image.gid
	if uid != nil {
		out.uid = *uid
		// The image's group goes with its user. containerd gives a runAsUser without runAsGroup
		// the group of that uid's passwd entry in the image, else 0; nodesim takes 0.
		out.gid = 0
	}
	if nonRoot != nil && *nonRoot {
		who := fmt.Sprintf("(pod: %q, container: %s)", fmt.Sprintf("%s_%s(%s)", pod.Name, pod.Namespace, pod.UID), spec.Name)
		switch {
		case uid != nil && *uid == 0:
			return out, fmt.Errorf("container's runAsUser breaks non-root policy %s", who)
		case out.uid == 0:
			return out, fmt.Errorf("container has runAsNonRoot and image will run as root %s", who)
		}
	}
	if gid != nil {
		out.gid = *gid
	}
	seen := map[int64]bool{}
	for _, g := range append(append([]int64{}, psc.SupplementalGroups...), ptrValues(psc.FSGroup)...) {
		if !seen[g] {
			seen[g] = true
			out.groups = append(out.groups, g)
		}
	}
	sort.Slice(out.groups, func(i, j int) bool { return out.groups[i] < out.groups[j] })
	out.changeUser = uid != nil || gid != nil || len(out.groups) > 0 || image != (imageIdentity{})
	out.noNewPrivs = csc.AllowPrivilegeEscalation != nil && !*csc.AllowPrivilegeEscalation
	if csc.Capabilities != nil {
		for _, c := range csc.Capabilities.Drop {
			name := strings.ToLower(strings.TrimPrefix(strings.ToUpper(string(c)), "CAP_"))
			if name == "all" {
				out.dropCaps = []string{"all"}
				break
			}
			out.dropCaps = append(out.dropCaps, name)
		}
	}
	out.readOnlyRoot = csc.ReadOnlyRootFilesystem != nil && *csc.ReadOnlyRootFilesystem
	return out, nil
}

func ptrValues(p *int64) []int64 {
	if p == nil {
		return nil
	}
	return []int64{*p}
}

// setprivArgs is the setpriv invocation that gives the process this identity, or nil when
// nothing changes. The parent-death signal is kept: changing the user would clear it, and the
// process must still die with the simulator.
func (sec containerSecurity) setprivArgs(setpriv string) []string {
	if !sec.changeUser && !sec.noNewPrivs && len(sec.dropCaps) == 0 {
		return nil
	}
	args := []string{setpriv, "--pdeathsig", "keep"}
	if sec.changeUser {
		args = append(args, "--reuid="+strconv.FormatInt(sec.uid, 10), "--regid="+strconv.FormatInt(sec.gid, 10))
		if len(sec.groups) == 0 {
			args = append(args, "--clear-groups")
		} else {
			gs := make([]string, len(sec.groups))
			for i, g := range sec.groups {
				gs[i] = strconv.FormatInt(g, 10)
			}
			args = append(args, "--groups="+strings.Join(gs, ","))
		}
	}
	if sec.noNewPrivs {
		args = append(args, "--no-new-privs")
	}
	if len(sec.dropCaps) > 0 {
		drops := make([]string, len(sec.dropCaps))
		for i, c := range sec.dropCaps {
			drops[i] = "-" + c
		}
		list := strings.Join(drops, ",")
		args = append(args, "--inh-caps="+list, "--bounding-set="+list)
	}
	return append(args, "--")
}

// fsGroup masks, as kubelet's SetVolumeOwnership applies them.
const (
	fsGroupRWMask   = os.FileMode(0o660)
	fsGroupROMask   = os.FileMode(0o440)
	fsGroupExecMask = os.FileMode(0o110)
)

// fsGroupMode is a file's mode once fsGroup ownership is applied.
func fsGroupMode(mode os.FileMode, dir, readOnly bool) os.FileMode {
	mask := fsGroupRWMask
	if readOnly {
		mask = fsGroupROMask
	}
	if dir {
		mask |= os.ModeSetgid | fsGroupExecMask
	}
	return mode | mask
}

// podFSGroup is the pod's fsGroup, if any.
func podFSGroup(pod *corev1.Pod) *int64 {
	if pod.Spec.SecurityContext == nil {
		return nil
	}
	return pod.Spec.SecurityContext.FSGroup
}

// applyFSGroup gives a writable volume (a claim, an emptyDir) to the pod's fsGroup the way
// kubelet does on mount: group-owned, group read-write, setgid directories so new files inherit
// the group. With OnRootMismatch a root that already looks right is left alone, so a large data
// directory is not walked on every start.
func applyFSGroup(dir string, pod *corev1.Pod) error {
	gid := podFSGroup(pod)
	if gid == nil {
		return nil
	}
	sc := pod.Spec.SecurityContext
	if sc.FSGroupChangePolicy != nil && *sc.FSGroupChangePolicy == corev1.FSGroupChangeOnRootMismatch && !rootNeedsFSGroup(dir, *gid) {
		return nil
	}
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := os.Lchown(p, -1, int(*gid)); err != nil {
			return fmt.Errorf("applying fsGroup %d to %s: %w", *gid, p, err)
		}
		if d.Type()&fs.ModeSymlink != 0 {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		return os.Chmod(p, fsGroupMode(info.Mode(), d.IsDir(), false))
	})
}

// rootNeedsFSGroup is kubelet's OnRootMismatch test: the volume root's group, permissions and
// setgid bit.
func rootNeedsFSGroup(dir string, gid int64) bool {
	info, err := os.Stat(dir)
	if err != nil || !info.IsDir() {
		return true
	}
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok || int64(st.Gid) != gid {
		return true
	}
	want := fsGroupRWMask | fsGroupExecMask
	return info.Mode().Perm()&want != want || info.Mode()&os.ModeSetgid == 0
}
