package helm

import (
	"path"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	configv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/config/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/features"
	"github.com/etcd-conductor/etcd-conductor/test/podsecurity"
)

const configKey = "config.yaml"

// fullname is the chart's name for the release's objects (etcd-conductor.fullname).
const fullname = releaseName + "-etcd-conductor"

// rendered is one chart render decoded into the typed objects the tests look at.
type rendered struct {
	all        manifests
	deployment appsv1.Deployment
	configMap  corev1.ConfigMap
	// clusterRole is the controllers' ClusterRole; nil when watchNamespaces gives Roles instead.
	clusterRole *rbacv1.ClusterRole
}

func renderDecoded(t *testing.T, valuesFiles []string, extra ...string) rendered {
	t.Helper()
	ms := splitManifests(t, render(t, valuesFiles, extra...))
	var r rendered
	r.all = ms
	decodeStrict(t, ms.ofKind(t, "Deployment"), &r.deployment)
	config, ok := ms.named("ConfigMap", releaseNamespace, fullname+"-config")
	if !ok {
		t.Fatalf("no ConfigMap %s-config rendered", fullname)
	}
	decodeStrict(t, config, &r.configMap)
	if m, ok := ms.named("ClusterRole", "", fullname); ok {
		r.clusterRole = &rbacv1.ClusterRole{}
		decodeStrict(t, m, r.clusterRole)
	}
	return r
}

func (r rendered) managerContainer(t *testing.T) corev1.Container {
	t.Helper()
	containers := r.deployment.Spec.Template.Spec.Containers
	if len(containers) != 1 || containers[0].Name != "manager" {
		t.Fatalf("want one container named manager, got %d: %v", len(containers), containers)
	}
	return containers[0]
}

// operatorConfig decodes the rendered config exactly as the manager does at start-up.
func (r rendered) operatorConfig(t *testing.T) (*configv1alpha1.OperatorConfiguration, features.Gates) {
	t.Helper()
	raw, ok := r.configMap.Data[configKey]
	if !ok {
		t.Fatalf("ConfigMap %s has no %s", r.configMap.Name, configKey)
	}
	cfg, err := configv1alpha1.Decode([]byte(raw))
	if err != nil {
		t.Fatalf("manager would reject the rendered configuration: %v\n%s", err, raw)
	}
	gates, err := features.New(cfg.FeatureGates)
	if err != nil {
		t.Fatalf("manager would reject the rendered feature gates: %v\n%s", err, raw)
	}
	return cfg, gates
}

// The chart is only useful if the manager starts with what it renders: decode every case with
// the manager's own strict decoder and check each value went where the values file put it.
func TestRenderedConfigIsAcceptedByManager(t *testing.T) {
	type want struct {
		onDelete         bool
		tlsSecret        string
		etcdSyncs        int
		ondeleteSyncs    int
		memberRoleSource configv1alpha1.MemberRoleSource
		watchNamespaces  []string
		metricsSecret    string
		qps              float32
		burst            int
		copyTasks        bool
		copySyncs        int
	}
	wants := map[string]want{
		"default": {etcdSyncs: 3, ondeleteSyncs: 3, memberRoleSource: configv1alpha1.MemberRoleSourceAuto, qps: 100, burst: 150, copySyncs: 3},
		"ondelete-tls": {onDelete: true, tlsSecret: "etcd-conductor-member-client-tls", etcdSyncs: 5, ondeleteSyncs: 2, memberRoleSource: configv1alpha1.MemberRoleSourceAuto,
			qps: 50.5, burst: 80, copyTasks: true, copySyncs: 2},
		"ha-monitoring": {etcdSyncs: 3, ondeleteSyncs: 3, memberRoleSource: configv1alpha1.MemberRoleSourceLeaseOnly,
			metricsSecret: "etcd-conductor-metrics-tls", qps: 100, burst: 150, copySyncs: 3},
		"namespaced": {etcdSyncs: 3, ondeleteSyncs: 3, memberRoleSource: configv1alpha1.MemberRoleSourceAuto,
			watchNamespaces: []string{"team-a", "team-b"}, qps: 100, burst: 150, copySyncs: 3},
	}
	for _, tc := range renderCases {
		t.Run(tc.name, func(t *testing.T) {
			w, ok := wants[tc.name]
			if !ok {
				t.Fatalf("no expectation for render case %q", tc.name)
			}
			r := renderDecoded(t, tc.valuesPaths(t))
			cfg, gates := r.operatorConfig(t)

			if got := gates.Enabled(features.QuorumAwareUpdatesWithOnDelete); got != w.onDelete {
				t.Errorf("QuorumAwareUpdatesWithOnDelete = %t, want %t", got, w.onDelete)
			}
			if got := cfg.Controllers.Etcd.ConcurrentSyncs; got != w.etcdSyncs {
				t.Errorf("controllers.etcd.concurrentSyncs = %d, want %d", got, w.etcdSyncs)
			}
			if got := cfg.Controllers.OnDelete.ConcurrentSyncs; got != w.ondeleteSyncs {
				t.Errorf("controllers.ondelete.concurrentSyncs = %d, want %d", got, w.ondeleteSyncs)
			}
			if got := cfg.Controllers.OnDelete.MemberRoleSource; got != w.memberRoleSource {
				t.Errorf("controllers.ondelete.memberRoleSource = %q, want %q", got, w.memberRoleSource)
			}
			if cfg.CopyBackupsTaskEnabled() != w.copyTasks || cfg.CopyBackupsTaskWorkers() != w.copySyncs {
				t.Errorf("controllers.etcdCopyBackupsTask enabled %t, concurrentSyncs %d; want %t, %d",
					cfg.CopyBackupsTaskEnabled(), cfg.CopyBackupsTaskWorkers(), w.copyTasks, w.copySyncs)
			}
			if cc := cfg.ClientConnection; cc.QPS != w.qps || cc.Burst != w.burst {
				t.Errorf("clientConnection = %+v, want qps %v burst %d", cc, w.qps, w.burst)
			}
			le := cfg.LeaderElection
			if !le.Enabled || le.ResourceNamespace != releaseNamespace || le.ResourceName == "" {
				t.Errorf("leader election = %+v, want enabled in namespace %s with a name", le, releaseNamespace)
			}
			if cfg.MetricsBindAddress != ":8443" || cfg.HealthProbeBindAddress != ":8081" {
				t.Errorf("bind addresses metrics=%q health=%q, want :8443 and :8081", cfg.MetricsBindAddress, cfg.HealthProbeBindAddress)
			}
			if !slices.Equal(cfg.WatchNamespaces, w.watchNamespaces) {
				t.Errorf("watchNamespaces = %v, want %v", cfg.WatchNamespaces, w.watchNamespaces)
			}
			checkMemberClientTLS(t, r, cfg, w.tlsSecret)
			checkMetricsTLS(t, r, cfg, w.metricsSecret)
		})
	}
}

// checkMemberClientTLS proves the files the config names are where the Secret is mounted: a
// mismatch would only show as a TLS error at the first rollout.
func checkMemberClientTLS(t *testing.T, r rendered, cfg *configv1alpha1.OperatorConfiguration, secretName string) {
	t.Helper()
	secretVolume := r.secretVolume("member-client-tls")
	if secretName == "" {
		if cfg.MemberClientTLS != nil {
			t.Errorf("memberClientTLS = %+v, want none without a secret", cfg.MemberClientTLS)
		}
		if secretVolume != nil {
			t.Errorf("secret volume %s mounted without memberClientTLS.secretName", secretVolume.Name)
		}
		return
	}
	if cfg.MemberClientTLS == nil {
		t.Fatal("memberClientTLS missing from the config although a secret is set")
	}
	if secretVolume == nil || secretVolume.Secret.SecretName != secretName {
		t.Fatalf("want a volume from secret %s, got %+v", secretName, secretVolume)
	}
	var mount *corev1.VolumeMount
	for i, m := range r.managerContainer(t).VolumeMounts {
		if m.Name == secretVolume.Name {
			mount = &r.managerContainer(t).VolumeMounts[i]
		}
	}
	if mount == nil {
		t.Fatalf("secret volume %s is not mounted in the manager", secretVolume.Name)
	}
	if !mount.ReadOnly {
		t.Errorf("member client TLS mount %s is writable", mount.MountPath)
	}
	files := map[string]string{
		"caFile":   cfg.MemberClientTLS.CAFile,
		"certFile": cfg.MemberClientTLS.CertFile,
		"keyFile":  cfg.MemberClientTLS.KeyFile,
	}
	wantKey := map[string]string{"caFile": "ca.crt", "certFile": "tls.crt", "keyFile": "tls.key"}
	for field, file := range files {
		if path.Dir(file) != mount.MountPath {
			t.Errorf("memberClientTLS.%s = %s, not in the mount %s", field, file, mount.MountPath)
		}
		if got := path.Base(file); got != wantKey[field] {
			t.Errorf("memberClientTLS.%s names %s, want the Secret key %s", field, got, wantKey[field])
		}
		projected := slices.ContainsFunc(secretVolume.Secret.Items, func(k corev1.KeyToPath) bool {
			return k.Key == path.Base(file) && k.Path == path.Base(file)
		})
		if !projected {
			t.Errorf("secret volume does not project %s as %s", path.Base(file), path.Base(file))
		}
	}
}

func (r rendered) secretVolume(name string) *corev1.Volume {
	for i, v := range r.deployment.Spec.Template.Spec.Volumes {
		if v.Name == name && v.Secret != nil {
			return &r.deployment.Spec.Template.Spec.Volumes[i]
		}
	}
	return nil
}

// checkMetricsTLS proves metricsCertDir is where the Secret's tls.crt and tls.key are mounted,
// as a directory (a subPath mount would never see a renewed certificate).
func checkMetricsTLS(t *testing.T, r rendered, cfg *configv1alpha1.OperatorConfiguration, secretName string) {
	t.Helper()
	volume := r.secretVolume("metrics-tls")
	if secretName == "" {
		if cfg.MetricsCertDir != "" || volume != nil {
			t.Errorf("metricsCertDir %q, volume %+v, want neither without metrics.tls.secretName", cfg.MetricsCertDir, volume)
		}
		return
	}
	if volume == nil || volume.Secret.SecretName != secretName {
		t.Fatalf("want a metrics-tls volume from secret %s, got %+v", secretName, volume)
	}
	mounted := slices.ContainsFunc(r.managerContainer(t).VolumeMounts, func(m corev1.VolumeMount) bool {
		return m.Name == volume.Name && m.MountPath == cfg.MetricsCertDir && m.ReadOnly && m.SubPath == ""
	})
	if !mounted {
		t.Errorf("metrics-tls is not mounted read-only as a directory at metricsCertDir %q: %+v", cfg.MetricsCertDir, r.managerContainer(t).VolumeMounts)
	}
	for _, key := range []string{"tls.crt", "tls.key"} {
		if !slices.ContainsFunc(volume.Secret.Items, func(k corev1.KeyToPath) bool { return k.Key == key && k.Path == key }) {
			t.Errorf("metrics-tls volume does not project %s", key)
		}
	}
}

// Every rendered object decodes strictly into its Kubernetes type, and the objects point at each
// other by the names they really have.
func TestRenderedObjectsAreConsistent(t *testing.T) {
	for _, tc := range renderCases {
		t.Run(tc.name, func(t *testing.T) {
			r := renderDecoded(t, tc.valuesPaths(t))
			var sa corev1.ServiceAccount
			decodeStrict(t, r.all.ofKind(t, "ServiceAccount"), &sa)
			for _, m := range r.all {
				switch m.Kind {
				case "ServiceAccount", "ConfigMap", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "Deployment", "Service", "ServiceMonitor", "PodMonitor", "PrometheusRule",
					"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding", "CustomResourceDefinition", "NetworkPolicy":
				default:
					t.Errorf("unexpected %s %s rendered", m.Kind, m.Name)
				}
			}

			pod := r.deployment.Spec.Template
			if pod.Spec.ServiceAccountName != sa.Name {
				t.Errorf("pod runs as %q, ServiceAccount is %q", pod.Spec.ServiceAccountName, sa.Name)
			}
			checkBindings(t, r.all, rbacv1.Subject{Kind: "ServiceAccount", Name: sa.Name, Namespace: releaseNamespace})
			if !selects(r.deployment.Spec.Selector.MatchLabels, pod.Labels) {
				t.Errorf("deployment selector %v does not select pod labels %v", r.deployment.Spec.Selector.MatchLabels, pod.Labels)
			}
			configFromVolume := ""
			for _, v := range pod.Spec.Volumes {
				if v.ConfigMap != nil {
					configFromVolume = v.ConfigMap.Name
				}
			}
			if configFromVolume != r.configMap.Name {
				t.Errorf("pod mounts ConfigMap %q, chart renders %q", configFromVolume, r.configMap.Name)
			}

			if r.all.count("Service") == 1 {
				var svc corev1.Service
				decodeStrict(t, r.all.ofKind(t, "Service"), &svc)
				if !selects(svc.Spec.Selector, pod.Labels) {
					t.Errorf("metrics Service selector %v does not select pod labels %v", svc.Spec.Selector, pod.Labels)
				}
				ports := containerPortNames(r.managerContainer(t))
				for _, p := range svc.Spec.Ports {
					if !slices.Contains(ports, p.TargetPort.String()) {
						t.Errorf("Service targets port %q, container has %v", p.TargetPort.String(), ports)
					}
				}
				if r.all.count("ServiceMonitor") == 1 {
					checkServiceMonitor(t, r.all.ofKind(t, "ServiceMonitor"), svc)
				}
			}
		})
	}
}

// checkBindings: every binding grants a role the chart renders (same kind, name and, for a
// RoleBinding, namespace) to the manager's ServiceAccount and nobody else.
func checkBindings(t *testing.T, ms manifests, want rbacv1.Subject) {
	t.Helper()
	bindings := 0
	for _, m := range ms {
		var ref rbacv1.RoleRef
		var subjects []rbacv1.Subject
		namespace := ""
		switch m.Kind {
		case "ClusterRoleBinding":
			var b rbacv1.ClusterRoleBinding
			decodeStrict(t, m, &b)
			ref, subjects = b.RoleRef, b.Subjects
		case "RoleBinding":
			var b rbacv1.RoleBinding
			decodeStrict(t, m, &b)
			ref, subjects, namespace = b.RoleRef, b.Subjects, b.Namespace
		default:
			continue
		}
		bindings++
		if _, ok := ms.named(ref.Kind, namespace, ref.Name); !ok {
			t.Errorf("%s %s refers to %s %q in %q, which the chart does not render", m.Kind, m.Name, ref.Kind, ref.Name, namespace)
		}
		if !slices.Equal(subjects, []rbacv1.Subject{want}) {
			t.Errorf("%s %s subjects %+v, want only %+v", m.Kind, m.Name, subjects, want)
		}
	}
	if bindings == 0 {
		t.Error("no binding rendered: the manager would have no rights")
	}
}

func checkServiceMonitor(t *testing.T, m manifest, svc corev1.Service) {
	t.Helper()
	// No Go type for ServiceMonitor is vendored; the fields used are few enough to declare.
	var sm struct {
		APIVersion string `json:"apiVersion"`
		Spec       struct {
			Selector struct {
				MatchLabels map[string]string `json:"matchLabels"`
			} `json:"selector"`
			NamespaceSelector struct {
				MatchNames []string `json:"matchNames"`
			} `json:"namespaceSelector"`
			Endpoints []struct {
				Port            string `json:"port"`
				Scheme          string `json:"scheme"`
				BearerTokenFile string `json:"bearerTokenFile"`
				TLSConfig       struct {
					ServerName         string `json:"serverName"`
					InsecureSkipVerify bool   `json:"insecureSkipVerify"`
					CA                 struct {
						Secret struct {
							Name string `json:"name"`
							Key  string `json:"key"`
						} `json:"secret"`
					} `json:"ca"`
				} `json:"tlsConfig"`
			} `json:"endpoints"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(m.YAML, &sm); err != nil {
		t.Fatalf("decoding ServiceMonitor: %v", err)
	}
	if sm.APIVersion != "monitoring.coreos.com/v1" {
		t.Errorf("ServiceMonitor apiVersion %q", sm.APIVersion)
	}
	if !selects(sm.Spec.Selector.MatchLabels, svc.Labels) {
		t.Errorf("ServiceMonitor selector %v does not select Service labels %v", sm.Spec.Selector.MatchLabels, svc.Labels)
	}
	if !slices.Equal(sm.Spec.NamespaceSelector.MatchNames, []string{releaseNamespace}) {
		t.Errorf("ServiceMonitor watches namespaces %v, want %s", sm.Spec.NamespaceSelector.MatchNames, releaseNamespace)
	}
	for _, e := range sm.Spec.Endpoints {
		if !slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == e.Port }) {
			t.Errorf("ServiceMonitor scrapes port %q, Service has %v", e.Port, svc.Spec.Ports)
		}
		// The endpoint is HTTPS with token review: scrape it so, and verify its certificate.
		tc := e.TLSConfig
		if e.Scheme != "https" || e.BearerTokenFile == "" {
			t.Errorf("ServiceMonitor endpoint scheme %q, bearerTokenFile %q: want https with a token", e.Scheme, e.BearerTokenFile)
		}
		if tc.InsecureSkipVerify || tc.CA.Secret.Name == "" || tc.CA.Secret.Key != "ca.crt" ||
			tc.ServerName != svc.Name+"."+releaseNamespace+".svc" {
			t.Errorf("ServiceMonitor tlsConfig %+v: want verification against a CA Secret's ca.crt for %s.%s.svc", tc, svc.Name, releaseNamespace)
		}
	}
}

func selects(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func containerPortNames(c corev1.Container) []string {
	names := make([]string, 0, len(c.Ports))
	for _, p := range c.Ports {
		names = append(names, p.Name)
	}
	return names
}

// The member-agent sidecar must run the manager's own image, whatever image the values pick.
func TestManagerImage(t *testing.T) {
	cases := []struct {
		name  string
		set   []string
		image string
	}{
		{name: "appVersion by default", image: "ghcr.io/etcd-conductor/etcd-conductor:0.1.0"},
		{name: "tag override", set: []string{"--set", "image.tag=0.2.0"}, image: "ghcr.io/etcd-conductor/etcd-conductor:0.2.0"},
		{
			name:  "mirror",
			set:   []string{"--set", "image.repository=mirror.example.com/conductor,image.tag=1.0.0"},
			image: "mirror.example.com/conductor:1.0.0",
		},
		{
			name:  "pinned by digest",
			set:   []string{"--set", "image.tag=0.2.0,image.digest=sha256:" + strings.Repeat("ab", 32)},
			image: "ghcr.io/etcd-conductor/etcd-conductor@sha256:" + strings.Repeat("ab", 32),
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := renderDecoded(t, nil, tc.set...).managerContainer(t)
			if c.Image != tc.image {
				t.Errorf("image %q, want %q", c.Image, tc.image)
			}
			want := []string{"manager", "--config", "/etc/etcd-conductor/config.yaml", "--member-agent-image", tc.image}
			if !slices.Equal(c.Args, want) {
				t.Errorf("args %v, want %v", c.Args, want)
			}
		})
	}
}

// TestManagerKnobs: the chart's settings for the manager pod reach it: log level and format
// through the configuration the manager reads, extra arguments after the chart's own, extra
// environment, priority class, topology spread; global (a parent chart's) is accepted.
func TestManagerKnobs(t *testing.T) {
	r := renderDecoded(t, nil, "--set", "logLevel=debug,logFormat=text,priorityClassName=system-cluster-critical,global.imageRegistry=x",
		"--set-json", `extraArgs=["--development"]`,
		"--set-json", `extraEnv=[{"name":"HTTPS_PROXY","value":"http://proxy:3128"}]`,
		"--set-json", `topologySpreadConstraints=[{"maxSkew":1,"topologyKey":"topology.kubernetes.io/zone","whenUnsatisfiable":"ScheduleAnyway"}]`)
	cfg, _ := r.operatorConfig(t)
	if cfg.Logging == nil || cfg.Logging.LogLevel != "debug" || cfg.Logging.LogFormat != "text" {
		t.Errorf("logging %+v, want debug/text", cfg.Logging)
	}
	c := r.managerContainer(t)
	if got := c.Args[len(c.Args)-1]; got != "--development" {
		t.Errorf("args %v: the extra argument is not last", c.Args)
	}
	if len(c.Env) != 1 || c.Env[0].Name != "HTTPS_PROXY" {
		t.Errorf("env %v", c.Env)
	}
	pod := r.deployment.Spec.Template.Spec
	if pod.PriorityClassName != "system-cluster-critical" || len(pod.TopologySpreadConstraints) != 1 {
		t.Errorf("priorityClassName %q, topologySpreadConstraints %v", pod.PriorityClassName, pod.TopologySpreadConstraints)
	}
}

func TestManagerDeployment(t *testing.T) {
	r := renderDecoded(t, nil)
	c := r.managerContainer(t)
	pod := r.deployment.Spec.Template.Spec

	if got := r.deployment.Spec.Replicas; got == nil || *got != 1 {
		t.Errorf("replicas %v, want 1", got)
	}
	configMounted := slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
		return m.MountPath == "/etc/etcd-conductor/config.yaml" && m.SubPath == configKey && m.ReadOnly
	})
	if !configMounted {
		t.Errorf("config.yaml is not mounted read-only at /etc/etcd-conductor/config.yaml: %+v", c.VolumeMounts)
	}

	if psc := pod.SecurityContext; psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot {
		t.Errorf("pod securityContext does not require a non-root user: %+v", psc)
	}
	sc := c.SecurityContext
	switch {
	case sc == nil:
		t.Fatal("manager has no securityContext")
	case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
		t.Error("root filesystem is writable")
	case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
		t.Error("privilege escalation is allowed")
	case sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}):
		t.Errorf("capabilities %+v, want all dropped", sc.Capabilities)
	}
	// The manager may run in a namespace enforcing the restricted Pod Security Standard.
	for _, values := range renderCases {
		rc := renderDecoded(t, values.valuesPaths(t))
		violations, err := podsecurity.RestrictedViolations(&rc.deployment.Spec.Template.ObjectMeta, &rc.deployment.Spec.Template.Spec)
		if err != nil {
			t.Fatal(err)
		}
		if len(violations) != 0 {
			t.Errorf("%s: manager pod violates the restricted Pod Security Standard: %v", values.name, violations)
		}
	}

	probes := []struct {
		name  string
		probe *corev1.Probe
		path  string
	}{
		{"liveness", c.LivenessProbe, "/healthz"},
		{"readiness", c.ReadinessProbe, "/readyz"},
	}
	for _, p := range probes {
		if p.probe == nil || p.probe.HTTPGet == nil {
			t.Errorf("%s probe is not an HTTP GET: %+v", p.name, p.probe)
			continue
		}
		if p.probe.HTTPGet.Path != p.path || containerPort(c, p.probe.HTTPGet.Port.String()) != 8081 {
			t.Errorf("%s probe GET %s on %s, want %s on 8081", p.name, p.probe.HTTPGet.Path, p.probe.HTTPGet.Port.String(), p.path)
		}
	}
	if got := containerPort(c, "metrics"); got != 8443 {
		t.Errorf("metrics port %d, want 8443", got)
	}
	if _, ok := c.Resources.Limits[corev1.ResourceMemory]; !ok {
		t.Errorf("no memory limit from values: %+v", c.Resources)
	}
}

func containerPort(c corev1.Container, name string) int32 {
	for _, p := range c.Ports {
		if p.Name == name {
			return p.ContainerPort
		}
	}
	return 0
}

// Without leader election two managers must never run at once, even during an upgrade.
func TestLeaderElectionDisabled(t *testing.T) {
	r := renderDecoded(t, nil, "--set", "leaderElection.enabled=false")
	cfg, _ := r.operatorConfig(t)
	if cfg.LeaderElection.Enabled {
		t.Error("config enables leader election although the values disable it")
	}
	if got := r.deployment.Spec.Strategy.Type; got != appsv1.RecreateDeploymentStrategyType {
		t.Errorf("deployment strategy %q, want Recreate", got)
	}
}

// The manager reads its configuration only at start-up, so flipping a gate must change the pod
// template (checksum annotation); a change that leaves the configuration alone must not.
func TestConfigChecksumRestartsManager(t *testing.T) {
	checksum := func(t *testing.T, extra ...string) string {
		t.Helper()
		r := renderDecoded(t, nil, extra...)
		sum := r.deployment.Spec.Template.Annotations["checksum/config"]
		if sum == "" {
			t.Fatal("pod template has no checksum/config annotation")
		}
		return sum
	}
	base := checksum(t)
	cases := []struct {
		name    string
		set     string
		changes bool
	}{
		{"feature gate turned on", "featureGates.QuorumAwareUpdatesWithOnDelete=true", true},
		{"member role source", "controllers.ondelete.memberRoleSource=LeaseOnly", true},
		{"member client TLS", "memberClientTLS.secretName=client-tls", true},
		{"image tag only", "image.tag=0.2.0", false},
		{"pod annotation only", "podAnnotations.a=b", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := checksum(t, "--set", tc.set)
			if changed := got != base; changed != tc.changes {
				t.Errorf("checksum changed = %t, want %t", changed, tc.changes)
			}
		})
	}
}

// The controllers' ClusterRole grants exactly this and nothing more. Each line is
// group/resource: verbs. The rules come from the code's +kubebuilder:rbac markers; this list is
// the reviewed expectation, so a marker that widens them fails here until the list is changed too.
func TestClusterRoleIsLeastPrivilege(t *testing.T) {
	// CreateOrUpdate through the cache; the GC deletes; patch: the Etcd reconciler mirrors the
	// Etcd's component protection onto each object, one annotation (syncProtection).
	owned := "get,list,watch,create,update,patch"
	want := map[string]string{
		"druid.gardener.cloud/etcds":                       "get,list,watch,patch", // patch: removes a consumed druid.gardener.cloud/operation annotation
		"druid.gardener.cloud/etcds/status":                "patch",
		"druid.gardener.cloud/etcds/finalizers":            "update",
		"druid.gardener.cloud/etcdopstasks":                "get,list,watch,delete", // delete: a finished task after its TTL
		"druid.gardener.cloud/etcdopstasks/status":         "update",
		"druid.gardener.cloud/etcdcopybackupstasks":        "get,list,watch",
		"druid.gardener.cloud/etcdcopybackupstasks/status": "update",
		"apps/statefulsets":                                owned + ",delete",         // patch also: the membership controller sets replicas; delete: orphaning, to change the claim template (volume change)
		"core/pods":                                        "list,watch,delete,patch", // patch: the handover-failures annotation on a leader pod
		"core/services":                                    owned,
		"core/configmaps":                                  owned,
		"core/serviceaccounts":                             owned,
		"rbac.authorization.k8s.io/roles":                  owned,
		"rbac.authorization.k8s.io/rolebindings":           owned,
		"coordination.k8s.io/leases":                       owned + ",delete",
		"policy/poddisruptionbudgets":                      owned,
		// Each Etcd's member NetworkPolicy; delete: once memberNetworkPolicy is turned off.
		"networking.k8s.io/networkpolicies": owned + ",delete",
		"core/events":                       "create,patch",
		"core/secrets":                      "get,create,update",
		// A volume change: claims listed and grown in place, the class asked whether it allows it.
		"core/persistentvolumeclaims":   "list,patch",
		"storage.k8s.io/storageclasses": "get",
	}
	r := renderDecoded(t, nil)
	if r.clusterRole == nil {
		t.Fatalf("no ClusterRole %s rendered", fullname)
	}
	got := map[string][]string{}
	for _, rule := range r.clusterRole.Rules {
		if len(rule.ResourceNames) > 0 || len(rule.NonResourceURLs) > 0 {
			t.Errorf("unexpected rule shape %+v", rule)
		}
		for _, group := range rule.APIGroups {
			for _, resource := range rule.Resources {
				if group == "" {
					group = "core"
				}
				key := group + "/" + resource
				got[key] = append(got[key], rule.Verbs...)
			}
		}
	}
	for key, verbs := range got {
		for _, v := range verbs {
			if strings.Contains(key, "*") || v == "*" {
				t.Errorf("wildcard in %s: %v", key, verbs)
			}
		}
		w, ok := want[key]
		if !ok {
			t.Errorf("grants %s %v, which the operator does not need", key, verbs)
			continue
		}
		if !sameVerbs(verbs, strings.Split(w, ",")) {
			t.Errorf("%s verbs %v, want %s", key, verbs, w)
		}
	}
	for key, w := range want {
		if _, ok := got[key]; !ok {
			t.Errorf("missing %s: %s", key, w)
		}
	}
}

func sameVerbs(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
