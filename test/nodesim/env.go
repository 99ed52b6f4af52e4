package nodesim

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// objectSource gives the env and volume builders read access to the objects a
// pod refers to; the simulator serves it from informer caches.
type objectSource interface {
	secret(namespace, name string) (*corev1.Secret, error)
	configMap(namespace, name string) (*corev1.ConfigMap, error)
}

// envContext is what env resolution needs besides the container spec.
type envContext struct {
	pod           *corev1.Pod
	podIP         string
	hostIP        string
	hostname      string
	apiServerHost string
	apiServerPort int
	objects       objectSource
	// home is $HOME: root's for root, "/" for a user no image /etc/passwd names (as runc does).
	home string
	// imageEnv is an OCI image's Env ("NAME=value"), under everything the pod sets.
	imageEnv []string
}

// containerEnv builds the container's environment as kubelet does: image-ish
// defaults, the kubernetes service variables, envFrom, then env in order with
// $(VAR) expansion against what is defined so far. The result keeps the
// order of definition; later entries win.
func containerEnv(c *corev1.Container, ec envContext) ([]corev1.EnvVar, error) {
	var out []corev1.EnvVar
	vars := map[string]string{}
	set := func(name, value string) {
		if _, ok := vars[name]; ok {
			for i := range out {
				if out[i].Name == name {
					out[i].Value = value
				}
			}
		} else {
			out = append(out, corev1.EnvVar{Name: name, Value: value})
		}
		vars[name] = value
	}
	set("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
	set("HOSTNAME", ec.hostname)
	home := ec.home
	if home == "" {
		home = "/root"
	}
	set("HOME", home)
	for _, kv := range ec.imageEnv {
		if name, value, ok := strings.Cut(kv, "="); ok && name != "" {
			set(name, value)
		}
	}
	if ec.apiServerHost != "" {
		port := strconv.Itoa(ec.apiServerPort)
		set("KUBERNETES_SERVICE_HOST", ec.apiServerHost)
		set("KUBERNETES_SERVICE_PORT", port)
		set("KUBERNETES_SERVICE_PORT_HTTPS", port)
		set("KUBERNETES_PORT", "tcp://"+ec.apiServerHost+":"+port)
		set("KUBERNETES_PORT_443_TCP", "tcp://"+ec.apiServerHost+":"+port)
		set("KUBERNETES_PORT_443_TCP_PROTO", "tcp")
		set("KUBERNETES_PORT_443_TCP_PORT", port)
		set("KUBERNETES_PORT_443_TCP_ADDR", ec.apiServerHost)
	}
	ns := ec.pod.Namespace
	for _, from := range c.EnvFrom {
		var data map[string]string
		switch {
		case from.ConfigMapRef != nil:
			cm, err := ec.objects.configMap(ns, from.ConfigMapRef.Name)
			if err != nil {
				if isOptional(from.ConfigMapRef.Optional) {
					continue
				}
				return nil, fmt.Errorf("configmap %q not found", from.ConfigMapRef.Name)
			}
			data = cm.Data
		case from.SecretRef != nil:
			s, err := ec.objects.secret(ns, from.SecretRef.Name)
			if err != nil {
				if isOptional(from.SecretRef.Optional) {
					continue
				}
				return nil, fmt.Errorf("secret %q not found", from.SecretRef.Name)
			}
			data = map[string]string{}
			for k, v := range s.Data {
				data[k] = string(v)
			}
		}
		keys := make([]string, 0, len(data))
		for k := range data {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			set(from.Prefix+k, data[k])
		}
	}
	for _, e := range c.Env {
		value := e.Value
		if e.ValueFrom == nil {
			value = expand(value, vars)
		} else {
			v, skip, err := envValueFrom(e.ValueFrom, c, ec)
			if err != nil {
				return nil, fmt.Errorf("env %s: %w", e.Name, err)
			}
			if skip {
				continue
			}
			value = v
		}
		set(e.Name, value)
	}
	return out, nil
}

func isOptional(b *bool) bool { return b != nil && *b }

func envValueFrom(from *corev1.EnvVarSource, c *corev1.Container, ec envContext) (value string, skip bool, err error) {
	ns := ec.pod.Namespace
	switch {
	case from.FieldRef != nil:
		v, err := podField(from.FieldRef.FieldPath, ec)
		return v, false, err
	case from.SecretKeyRef != nil:
		ref := from.SecretKeyRef
		s, err := ec.objects.secret(ns, ref.Name)
		if err != nil {
			if isOptional(ref.Optional) {
				return "", true, nil
			}
			return "", false, fmt.Errorf("secret %q not found", ref.Name)
		}
		v, ok := s.Data[ref.Key]
		if !ok {
			if isOptional(ref.Optional) {
				return "", true, nil
			}
			return "", false, fmt.Errorf("couldn't find key %s in Secret %s/%s", ref.Key, ns, ref.Name)
		}
		return string(v), false, nil
	case from.ConfigMapKeyRef != nil:
		ref := from.ConfigMapKeyRef
		cm, err := ec.objects.configMap(ns, ref.Name)
		if err != nil {
			if isOptional(ref.Optional) {
				return "", true, nil
			}
			return "", false, fmt.Errorf("configmap %q not found", ref.Name)
		}
		v, ok := cm.Data[ref.Key]
		if !ok {
			if isOptional(ref.Optional) {
				return "", true, nil
			}
			return "", false, fmt.Errorf("couldn't find key %s in ConfigMap %s/%s", ref.Key, ns, ref.Name)
		}
		return v, false, nil
	case from.ResourceFieldRef != nil:
		return "", false, fmt.Errorf("resourceFieldRef is not supported by nodesim")
	}
	return "", false, fmt.Errorf("empty valueFrom")
}

// podField resolves a downward API field path for env vars and volumes.
func podField(fieldPath string, ec envContext) (string, error) {
	p := ec.pod
	switch fieldPath {
	case "metadata.name":
		return p.Name, nil
	case "metadata.namespace":
		return p.Namespace, nil
	case "metadata.uid":
		return string(p.UID), nil
	case "spec.nodeName":
		return p.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return p.Spec.ServiceAccountName, nil
	case "status.podIP", "status.podIPs":
		return ec.podIP, nil
	case "status.hostIP", "status.hostIPs":
		return ec.hostIP, nil
	case "metadata.labels":
		return formatMap(p.Labels), nil
	case "metadata.annotations":
		return formatMap(p.Annotations), nil
	}
	for prefix, m := range map[string]map[string]string{"metadata.labels": p.Labels, "metadata.annotations": p.Annotations} {
		if strings.HasPrefix(fieldPath, prefix+"['") && strings.HasSuffix(fieldPath, "']") {
			return m[fieldPath[len(prefix)+2:len(fieldPath)-2]], nil
		}
	}
	return "", fmt.Errorf("field path %q is not supported by nodesim", fieldPath)
}

// formatMap renders labels/annotations like kubelet's downward API files: key="value" lines, sorted.
func formatMap(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "%s=%s", k, strconv.Quote(m[k]))
	}
	return b.String()
}

// expand implements Kubernetes' $(VAR) syntax: a defined $(VAR) is replaced,
// an undefined one stays as written, and $$ escapes a dollar sign.
func expand(s string, vars map[string]string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			name := s[i+2 : i+2+end]
			if v, ok := vars[name]; ok {
				b.WriteString(v)
			} else {
				b.WriteString(s[i : i+3+end])
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}

// envMap turns the ordered env into a lookup table for expanding command and args.
func envMap(env []corev1.EnvVar) map[string]string {
	m := make(map[string]string, len(env))
	for _, e := range env {
		m[e.Name] = e.Value
	}
	return m
}

func expandAll(in []string, vars map[string]string) []string {
	out := make([]string, len(in))
	for i, s := range in {
		out[i] = expand(s, vars)
	}
	return out
}
