package nodesim

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
)

// volumeFile is one file of a secret, configMap, downwardAPI or projected volume.
type volumeFile struct {
	data []byte
	mode os.FileMode
}

// tokenSource issues service account tokens bound to a pod (TokenRequest API).
type tokenSource interface {
	token(ctx context.Context, pod *corev1.Pod, audience string, expirationSeconds int64) (string, time.Time, error)
}

// volumeBuilder renders a pod's volumes into host directories.
type volumeBuilder struct {
	namespace string
	pod       *corev1.Pod
	ec        envContext
	tokens    tokenSource
	podDir    string // <workdir>/pods/<uid>
	// claimVolume checks (and binds) a claim and returns its data directory.
	claimVolume func(namespace, name string) (string, error)
	claimDirs   map[string]string // claim name → data directory, once checked
	// cached tokens by volume/path, renewed at 80% of their lifetime as kubelet does
	tokenCache map[string]cachedToken
	// owned lists the writable volumes fsGroup ownership was applied to: kubelet does it once,
	// when it mounts the volume for the pod.
	owned map[string]bool
}

type cachedToken struct {
	token   string
	renewAt time.Time
}

// hostPath is where volume `name` lives on the host.
func (b *volumeBuilder) hostPath(v *corev1.Volume) string {
	if v.PersistentVolumeClaim != nil {
		return b.claimDirs[v.PersistentVolumeClaim.ClaimName]
	}
	if v.HostPath != nil {
		return v.HostPath.Path
	}
	return filepath.Join(b.podDir, "volumes", v.Name)
}

// sync creates or refreshes every volume of the pod. It is called before the
// first container starts and then periodically, so secret and configMap
// updates reach running containers.
func (b *volumeBuilder) sync(ctx context.Context) error {
	for i := range b.pod.Spec.Volumes {
		v := &b.pod.Spec.Volumes[i]
		dir := b.hostPath(v)
		switch {
		case v.EmptyDir != nil:
			if err := os.MkdirAll(dir, 0o777); err != nil {
				return fmt.Errorf("volume %s: %w", v.Name, err)
			}
			if err := os.Chmod(dir, 0o777); err != nil { // not narrowed by the umask
				return fmt.Errorf("volume %s: %w", v.Name, err)
			}
			if err := b.own(v.Name, dir); err != nil {
				return fmt.Errorf("volume %s: %w", v.Name, err)
			}
		case v.PersistentVolumeClaim != nil:
			if claim := v.PersistentVolumeClaim.ClaimName; b.claimDirs[claim] == "" {
				claimDir, err := b.claimVolume(b.namespace, claim)
				if err != nil {
					return fmt.Errorf("volume %s: %w", v.Name, err)
				}
				if b.claimDirs == nil {
					b.claimDirs = map[string]string{}
				}
				b.claimDirs[claim] = claimDir
			}
			if err := b.own(v.Name, b.claimDirs[v.PersistentVolumeClaim.ClaimName]); err != nil {
				return fmt.Errorf("volume %s: %w", v.Name, err)
			}
		case v.HostPath != nil:
			if v.HostPath.Type != nil && *v.HostPath.Type == corev1.HostPathDirectoryOrCreate {
				if err := os.MkdirAll(dir, 0o755); err != nil {
					return fmt.Errorf("volume %s: %w", v.Name, err)
				}
			}
		case v.Secret != nil, v.ConfigMap != nil, v.DownwardAPI != nil, v.Projected != nil:
			files, err := b.files(ctx, v)
			if err != nil {
				return fmt.Errorf("volume %s: %w", v.Name, err)
			}
			gid := -1
			if fsGroup := podFSGroup(b.pod); fsGroup != nil {
				// kubelet's SetVolumeOwnership for these read-only volumes: group fsGroup,
				// group-readable whatever defaultMode says.
				gid = int(*fsGroup)
				for p, f := range files {
					files[p] = volumeFile{data: f.data, mode: fsGroupMode(f.mode, false, true)}
				}
			}
			if err := writeAtomic(dir, files, gid); err != nil {
				return fmt.Errorf("volume %s: %w", v.Name, err)
			}
		default:
			return fmt.Errorf("volume %s: volume type not supported by nodesim", v.Name)
		}
	}
	return nil
}

// own applies the pod's fsGroup to a writable volume, once per pod.
func (b *volumeBuilder) own(name, dir string) error {
	if b.owned[name] {
		return nil
	}
	if err := applyFSGroup(dir, b.pod); err != nil {
		return err
	}
	if b.owned == nil {
		b.owned = map[string]bool{}
	}
	b.owned[name] = true
	return nil
}

func (b *volumeBuilder) files(ctx context.Context, v *corev1.Volume) (map[string]volumeFile, error) {
	files := map[string]volumeFile{}
	switch {
	case v.Secret != nil:
		return files, b.addSecret(files, v.Secret.SecretName, v.Secret.Items, modeOr(v.Secret.DefaultMode), v.Secret.Optional)
	case v.ConfigMap != nil:
		return files, b.addConfigMap(files, v.ConfigMap.Name, v.ConfigMap.Items, modeOr(v.ConfigMap.DefaultMode), v.ConfigMap.Optional)
	case v.DownwardAPI != nil:
		return files, b.addDownward(files, v.DownwardAPI.Items, modeOr(v.DownwardAPI.DefaultMode))
	}
	mode := modeOr(v.Projected.DefaultMode)
	for i, src := range v.Projected.Sources {
		var err error
		switch {
		case src.Secret != nil:
			err = b.addSecret(files, src.Secret.Name, src.Secret.Items, mode, src.Secret.Optional)
		case src.ConfigMap != nil:
			err = b.addConfigMap(files, src.ConfigMap.Name, src.ConfigMap.Items, mode, src.ConfigMap.Optional)
		case src.DownwardAPI != nil:
			err = b.addDownward(files, src.DownwardAPI.Items, mode)
		case src.ServiceAccountToken != nil:
			err = b.addToken(ctx, files, fmt.Sprintf("%s/%d", v.Name, i), src.ServiceAccountToken, mode)
		default:
			err = fmt.Errorf("projected source %d: type not supported by nodesim", i)
		}
		if err != nil {
			return nil, err
		}
	}
	return files, nil
}

func modeOr(m *int32) os.FileMode {
	if m == nil {
		return 0o644
	}
	return os.FileMode(*m)
}

func itemMode(m *int32, def os.FileMode) os.FileMode {
	if m == nil {
		return def
	}
	return os.FileMode(*m)
}

func (b *volumeBuilder) addSecret(files map[string]volumeFile, name string, items []corev1.KeyToPath, mode os.FileMode, optional *bool) error {
	s, err := b.ec.objects.secret(b.namespace, name)
	if err != nil {
		if isOptional(optional) {
			return nil
		}
		return fmt.Errorf("secret %q not found", name)
	}
	return addKeys(files, "secret", name, s.Data, items, mode, optional)
}

func (b *volumeBuilder) addConfigMap(files map[string]volumeFile, name string, items []corev1.KeyToPath, mode os.FileMode, optional *bool) error {
	cm, err := b.ec.objects.configMap(b.namespace, name)
	if err != nil {
		if isOptional(optional) {
			return nil
		}
		return fmt.Errorf("configmap %q not found", name)
	}
	data := map[string][]byte{}
	for k, v := range cm.Data {
		data[k] = []byte(v)
	}
	for k, v := range cm.BinaryData {
		data[k] = v
	}
	return addKeys(files, "configmap", name, data, items, mode, optional)
}

func addKeys(files map[string]volumeFile, kind, name string, data map[string][]byte, items []corev1.KeyToPath, mode os.FileMode, optional *bool) error {
	if len(items) == 0 {
		for k, v := range data {
			files[k] = volumeFile{data: v, mode: mode}
		}
		return nil
	}
	for _, it := range items {
		v, ok := data[it.Key]
		if !ok {
			if isOptional(optional) {
				continue
			}
			return fmt.Errorf("%s %q has no key %q", kind, name, it.Key)
		}
		files[it.Path] = volumeFile{data: v, mode: itemMode(it.Mode, mode)}
	}
	return nil
}

func (b *volumeBuilder) addDownward(files map[string]volumeFile, items []corev1.DownwardAPIVolumeFile, mode os.FileMode) error {
	for _, it := range items {
		if it.FieldRef == nil {
			return fmt.Errorf("downwardAPI %s: only fieldRef is supported by nodesim", it.Path)
		}
		v, err := podField(it.FieldRef.FieldPath, b.ec)
		if err != nil {
			return err
		}
		files[it.Path] = volumeFile{data: []byte(v), mode: itemMode(it.Mode, mode)}
	}
	return nil
}

func (b *volumeBuilder) addToken(ctx context.Context, files map[string]volumeFile, key string, src *corev1.ServiceAccountTokenProjection, mode os.FileMode) error {
	if b.tokenCache == nil {
		b.tokenCache = map[string]cachedToken{}
	}
	c, ok := b.tokenCache[key]
	if !ok || time.Now().After(c.renewAt) {
		exp := int64(3607)
		if src.ExpirationSeconds != nil {
			exp = *src.ExpirationSeconds
		}
		tok, expiry, err := b.tokens.token(ctx, b.pod, src.Audience, exp)
		if err != nil {
			return fmt.Errorf("requesting service account token: %w", err)
		}
		now := time.Now()
		c = cachedToken{token: tok, renewAt: now.Add(expiry.Sub(now) * 8 / 10)}
		b.tokenCache[key] = c
	}
	// kubelet writes tokens 0600 unless a mode is set explicitly; 0644 default mode still applies here.
	files[src.Path] = volumeFile{data: []byte(c.token), mode: mode}
	return nil
}

type authTokenRequest = authenticationv1.TokenRequest

// apiTokenSource requests tokens like kubelet: bound to the pod object.
type apiTokenSource struct {
	create func(ctx context.Context, namespace, serviceAccount string, tr *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error)
}

func (a apiTokenSource) token(ctx context.Context, pod *corev1.Pod, audience string, exp int64) (string, time.Time, error) {
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: &exp,
		BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
	}}
	if audience != "" {
		tr.Spec.Audiences = []string{audience}
	}
	out, err := a.create(ctx, pod.Namespace, sa, tr)
	if err != nil {
		return "", time.Time{}, err
	}
	return out.Status.Token, out.Status.ExpirationTimestamp.Time, nil
}

// writeAtomic lays out files the way kubelet's atomic writer does: the data
// sits in a timestamped directory, "..data" points at it, and each top-level
// name is a symlink through "..data". An update builds a new directory and
// swaps "..data" with a rename, so readers never see a half-written set and
// the bind-mounted volume directory itself never changes inode. Nothing is
// written when the content is unchanged. A gid >= 0 is the pod's fsGroup:
// everything is group-owned by it and directories get setgid, as kubelet's
// SetVolumeOwnership leaves them (file modes already carry the group bits).
func writeAtomic(dir string, files map[string]volumeFile, gid int) error {
	dirMode := os.FileMode(0o755)
	if gid >= 0 {
		dirMode = fsGroupMode(dirMode, true, true)
	}
	chown := func(p string) error {
		if gid < 0 {
			return nil
		}
		return os.Lchown(p, -1, gid)
	}
	mkdir := func(p string) error {
		if err := os.MkdirAll(p, 0o755); err != nil {
			return err
		}
		if err := chown(p); err != nil {
			return err
		}
		return os.Chmod(p, dirMode)
	}
	if err := mkdir(dir); err != nil {
		return err
	}
	dataLink := filepath.Join(dir, "..data")
	if current, err := os.Readlink(dataLink); err == nil {
		if sameContent(filepath.Join(dir, current), files, gid) {
			return nil
		}
	}
	tsDir, err := os.MkdirTemp(dir, ".."+time.Now().UTC().Format("2006_01_02_15_04_05."))
	if err != nil {
		return err
	}
	if err := mkdir(tsDir); err != nil {
		return err
	}
	for p, f := range files {
		full := filepath.Join(tsDir, p)
		for d := filepath.Dir(full); d != tsDir; d = filepath.Dir(d) {
			if err := mkdir(d); err != nil {
				return err
			}
		}
		if err := os.WriteFile(full, f.data, f.mode); err != nil {
			return err
		}
		if err := chown(full); err != nil {
			return err
		}
		if err := os.Chmod(full, f.mode); err != nil {
			return err
		}
	}
	tmpLink := filepath.Join(dir, "..data_tmp")
	_ = os.Remove(tmpLink)
	if err := os.Symlink(filepath.Base(tsDir), tmpLink); err != nil {
		return err
	}
	if err := chown(tmpLink); err != nil {
		return err
	}
	old, _ := os.Readlink(dataLink)
	if err := os.Rename(tmpLink, dataLink); err != nil {
		return err
	}
	top := map[string]bool{}
	for p := range files {
		top[strings.SplitN(filepath.ToSlash(p), "/", 2)[0]] = true
	}
	for name := range top {
		link := filepath.Join(dir, name)
		if _, err := os.Lstat(link); err == nil {
			continue
		}
		if err := os.Symlink(filepath.Join("..data", name), link); err != nil {
			return err
		}
		if err := chown(link); err != nil {
			return err
		}
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "..") && !top[e.Name()] {
			_ = os.Remove(filepath.Join(dir, e.Name()))
		}
	}
	if old != "" && old != filepath.Base(tsDir) {
		_ = os.RemoveAll(filepath.Join(dir, old))
	}
	return nil
}

func sameContent(dir string, files map[string]volumeFile, gid int) bool {
	var existing []string
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			existing = append(existing, rel)
		}
		return nil
	})
	if len(existing) != len(files) {
		return false
	}
	sort.Strings(existing)
	for _, rel := range existing {
		f, ok := files[rel]
		if !ok {
			return false
		}
		fi, err := os.Stat(filepath.Join(dir, rel))
		if err != nil || fi.Mode().Perm() != f.mode.Perm() {
			return false
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); gid >= 0 && (!ok || int(st.Gid) != gid) {
			return false
		}
		got, err := os.ReadFile(filepath.Join(dir, rel))
		if err != nil || !bytes.Equal(got, f.data) {
			return false
		}
	}
	return true
}
