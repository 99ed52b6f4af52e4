package helm

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	// etcd's packages register the members' series on the default registry as they load: the
	// names the alert rules and the dashboard may query.
	_ "go.etcd.io/etcd/server/v3/etcdserver"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/member/backup"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/controller/defrag"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/controller/ondelete"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/controller/status"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
)

// managerDownAlert fires when no manager is scraped.
const managerDownAlert = "EtcdConductorDown"

// monitoringOn renders the chart with the PodMonitor, the PrometheusRule and the dashboard.
var monitoringOn = []string{"--set", "metrics.podMonitor.enabled=true,metrics.prometheusRule.enabled=true,metrics.dashboard.enabled=true"}

// namingRegisterer keeps the names of the series registered on it, whether or not any has a value.
type namingRegisterer map[string]bool

var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

func (r namingRegisterer) Register(c prometheus.Collector) error {
	descs := make(chan *prometheus.Desc)
	go func() { c.Describe(descs); close(descs) }()
	for d := range descs {
		if m := fqName.FindStringSubmatch(d.String()); m != nil {
			r[m[1]] = true
		}
	}
	return nil
}

func (r namingRegisterer) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		_ = r.Register(c)
	}
}

func (r namingRegisterer) Unregister(prometheus.Collector) bool { return true }

// exportedMetrics are the series the manager's controllers, the member-agent and etcd export.
// etcd's come from its default registry, where a vector without values is missing: the rules
// and the dashboard query etcd's plain series only.
func exportedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	names := namingRegisterer{}
	if _, err := status.NewMetrics(names); err != nil {
		t.Fatal(err)
	}
	if _, err := ondelete.NewMetrics(names); err != nil {
		t.Fatal(err)
	}
	if _, err := defrag.NewMetrics(names); err != nil {
		t.Fatal(err)
	}
	backup.NewMetrics(names)
	families, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if strings.HasPrefix(f.GetName(), "etcd_") {
			names[f.GetName()] = true
		}
	}
	return names
}

// metricName matches what can be a series name in PromQL; label names and values, functions
// and keywords are told apart by the prefixes the checked series have.
var metricName = regexp.MustCompile(`\b(etcd|grpc)_[a-zA-Z0-9_:]+\b`)

// unknownMetrics lists the series expr queries that nobody exports (a histogram's _bucket, _sum
// and _count are its name's).
func unknownMetrics(expr string, known map[string]bool) []string {
	var unknown []string
	for _, name := range metricName.FindAllString(expr, -1) {
		base := name
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if b, ok := strings.CutSuffix(name, suffix); ok && known[b] {
				base = b
			}
		}
		if !known[base] {
			unknown = append(unknown, name)
		}
	}
	return unknown
}

// prometheusRuleGroups is the rendered PrometheusRule's spec.groups, the content of a rule file.
func prometheusRuleGroups(t *testing.T, ms manifests) []map[string]any {
	t.Helper()
	var rule struct {
		APIVersion string `json:"apiVersion"`
		Spec       struct {
			Groups []map[string]any `json:"groups"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(ms.ofKind(t, "PrometheusRule").YAML, &rule); err != nil {
		t.Fatalf("decoding PrometheusRule: %v", err)
	}
	if rule.APIVersion != "monitoring.coreos.com/v1" || len(rule.Spec.Groups) == 0 {
		t.Fatalf("PrometheusRule %s with %d groups", rule.APIVersion, len(rule.Spec.Groups))
	}
	return rule.Spec.Groups
}

// serviceMonitorOn adds the ServiceMonitor (which needs a serving certificate): the alert on the
// manager itself is rendered only with it, since only then is the scrape job's name known.
var serviceMonitorOn = []string{"--set", "metrics.serviceMonitor.enabled=true,metrics.tls.secretName=metrics-tls"}

// alertNames lists the alerts of a rendered PrometheusRule.
func alertNames(groups []map[string]any) []string {
	var names []string
	for _, g := range groups {
		rules, _ := g["rules"].([]any)
		for _, r := range rules {
			rule, _ := r.(map[string]any)
			if name, ok := rule["alert"].(string); ok {
				names = append(names, name)
			}
		}
	}
	return names
}

// TestAlertRules runs testdata/alerts/alerts.test.yaml with promtool against the alert rules the
// chart renders with its default values (and the ServiceMonitor), after checking they query only
// series that exist.
func TestAlertRules(t *testing.T) {
	withoutServiceMonitor := alertNames(prometheusRuleGroups(t, splitManifests(t, render(t, nil, monitoringOn...))))
	if slices.Contains(withoutServiceMonitor, managerDownAlert) {
		t.Errorf("%s rendered without the ServiceMonitor, whose job label it matches: it would fire forever", managerDownAlert)
	}
	groups := prometheusRuleGroups(t, splitManifests(t, render(t, nil, append(slices.Clone(monitoringOn), serviceMonitorOn...)...)))
	if names := alertNames(groups); !slices.Contains(names, managerDownAlert) {
		t.Errorf("alerts %v with the ServiceMonitor, want %s among them", names, managerDownAlert)
	}
	known := exportedMetrics(t)
	for _, g := range groups {
		rules, _ := g["rules"].([]any)
		for _, r := range rules {
			rule, _ := r.(map[string]any)
			expr, _ := rule["expr"].(string)
			if unknown := unknownMetrics(expr, known); len(unknown) > 0 {
				t.Errorf("alert %v queries %v, which neither the operator nor etcd exports", rule["alert"], unknown)
			}
		}
	}

	promtool := requireBinary(t, "promtool")
	dir := t.TempDir()
	rulesFile, err := yaml.Marshal(map[string]any{"groups": groups})
	if err != nil {
		t.Fatal(err)
	}
	tests, err := os.ReadFile(testdataPath(t, filepath.Join("alerts", "alerts.test.yaml")))
	if err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string][]byte{"rules.yaml": rulesFile, "alerts.test.yaml": tests} {
		if err := os.WriteFile(filepath.Join(dir, name), content, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, promtool, "test", "rules", "alerts.test.yaml")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
}

// podMonitor is the part of a PodMonitor the tests look at (no Go type for it is vendored).
type podMonitor struct {
	Spec struct {
		Selector struct {
			MatchLabels map[string]string `json:"matchLabels"`
		} `json:"selector"`
		NamespaceSelector struct {
			Any        bool     `json:"any"`
			MatchNames []string `json:"matchNames"`
		} `json:"namespaceSelector"`
		Endpoints []struct {
			Port        string `json:"port"`
			Scheme      string `json:"scheme"`
			Relabelings []struct {
				SourceLabels []string `json:"sourceLabels"`
				TargetLabel  string   `json:"targetLabel"`
			} `json:"relabelings"`
		} `json:"podMetricsEndpoints"`
	} `json:"spec"`
}

// memberPods are the pod templates of an Etcd without and with backups, as the operator makes them.
func memberPods(t *testing.T) map[string]corev1.PodTemplateSpec {
	t.Helper()
	plain := &druidv1alpha1.Etcd{ObjectMeta: metav1.ObjectMeta{Name: "main", Namespace: "team-a"}, Spec: druidv1alpha1.EtcdSpec{Replicas: 3}}
	backedUp := plain.DeepCopy()
	backedUp.Spec.Backup = &druidv1alpha1.BackupSpec{Store: &druidv1alpha1.StoreSpec{
		Provider: ptr.To(druidv1alpha1.StorageProvider("S3")), Container: ptr.To("bucket"), Prefix: "p"}}
	out := map[string]corev1.PodTemplateSpec{}
	for name, e := range map[string]*druidv1alpha1.Etcd{"without backups": plain, "with backups": backedUp} {
		sts, err := resources.StatefulSet(e, resources.Settings{MemberAgentImage: "img"})
		if err != nil {
			t.Fatalf("StatefulSet of an Etcd %s: %v", name, err)
		}
		out[name] = sts.Spec.Template
	}
	return out
}

// podPort is the port of that name in any of the pod's containers, 0 without one.
func podPort(pod corev1.PodTemplateSpec, name string) int32 {
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			if p.Name == name {
				return p.ContainerPort
			}
		}
	}
	return 0
}

// TestPodMonitorScrapesMemberPods: the PodMonitor selects the member pods the operator makes, in
// the namespaces it watches, and scrapes etcd's metrics port (and the agent's backup metrics
// where backups run) by the names the pods give them, labelling each series with its Etcd and member.
func TestPodMonitorScrapesMemberPods(t *testing.T) {
	pods := memberPods(t)
	for _, tc := range []struct {
		name           string
		values         []string
		wantNamespaces []string // nil: all
	}{
		{name: "all namespaces"},
		{name: "watched namespaces", values: []string{testdataPath(t, "namespaced.values.yaml")}, wantNamespaces: []string{"team-a", "team-b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var pm podMonitor
			if err := yaml.Unmarshal(splitManifests(t, render(t, tc.values, monitoringOn...)).ofKind(t, "PodMonitor").YAML, &pm); err != nil {
				t.Fatalf("decoding PodMonitor: %v", err)
			}
			if ns := pm.Spec.NamespaceSelector; ns.Any != (tc.wantNamespaces == nil) || !slices.Equal(ns.MatchNames, tc.wantNamespaces) {
				t.Errorf("PodMonitor namespaces any=%t %v, want %v (nil: any)", ns.Any, ns.MatchNames, tc.wantNamespaces)
			}
			for podName, pod := range pods {
				if !selects(pm.Spec.Selector.MatchLabels, pod.Labels) {
					t.Errorf("PodMonitor selector %v does not select the member pods (%s) %v", pm.Spec.Selector.MatchLabels, podName, pod.Labels)
				}
			}
			want := map[string]int32{"metrics": resources.MetricsPort, "backup-metrics": resources.BackupMetricsPort}
			var scraped []string
			for _, e := range pm.Spec.Endpoints {
				scraped = append(scraped, e.Port)
				if e.Scheme != "http" {
					t.Errorf("port %s scraped over %q; the members serve metrics on plain HTTP", e.Port, e.Scheme)
				}
				if got := podPort(pods["with backups"], e.Port); got != want[e.Port] {
					t.Errorf("PodMonitor scrapes port %q, which is %d on a member pod with backups, want %d", e.Port, got, want[e.Port])
				}
				targets := map[string][]string{}
				for _, r := range e.Relabelings {
					targets[r.TargetLabel] = r.SourceLabels
				}
				instance := "__meta_kubernetes_pod_label_" + strings.NewReplacer(".", "_", "/", "_", "-", "_").Replace(resources.LabelInstance)
				if !slices.Equal(targets["etcd"], []string{instance}) || !slices.Equal(targets["member"], []string{"__meta_kubernetes_pod_name"}) {
					t.Errorf("port %s relabels %v, want etcd from %s and member from the pod name", e.Port, targets, instance)
				}
			}
			if !slices.Equal(scraped, []string{"metrics", "backup-metrics"}) {
				t.Errorf("PodMonitor scrapes %v, want etcd's metrics and the agent's backup-metrics", scraped)
			}
			if podPort(pods["without backups"], "backup-metrics") != 0 {
				t.Error("a member pod without backups has a backup-metrics port: the PodMonitor would scrape a port nothing listens on")
			}
		})
	}
}

// TestDashboard: the dashboard parses, the chart ships it unchanged with the label Grafana's
// sidecar looks for, and every series it queries is one the operator or etcd exports.
func TestDashboard(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(chartDir(t), "files", "dashboards", "etcd-conductor.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dashboard map[string]any
	if err := json.Unmarshal(raw, &dashboard); err != nil {
		t.Fatalf("dashboard JSON: %v", err)
	}
	var queries []string
	collectQueries(dashboard, &queries)
	if len(queries) < 10 {
		t.Fatalf("found %d queries in the dashboard; the walk misses them", len(queries))
	}
	known := exportedMetrics(t)
	for _, q := range queries {
		if unknown := unknownMetrics(q, known); len(unknown) > 0 {
			t.Errorf("dashboard queries %v, which neither the operator nor etcd exports: %s", unknown, q)
		}
	}

	var cm corev1.ConfigMap
	ms := splitManifests(t, render(t, nil, monitoringOn...))
	m, ok := ms.named("ConfigMap", releaseNamespace, fullname+"-dashboard")
	if !ok {
		t.Fatal("no dashboard ConfigMap rendered with metrics.dashboard.enabled")
	}
	decodeStrict(t, m, &cm)
	if cm.Data["etcd-conductor.json"] != strings.TrimSuffix(string(raw), "\n") || cm.Labels["grafana_dashboard"] != "1" {
		t.Errorf("dashboard ConfigMap labels %v, data equal to the file: %t", cm.Labels, cm.Data["etcd-conductor.json"] == string(raw))
	}
}

// collectQueries appends every PromQL string of a dashboard: the targets' expr and the
// variables' definition.
func collectQueries(v any, out *[]string) {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if s, ok := x.(string); ok && (k == "expr" || k == "definition") {
				*out = append(*out, s)
				continue
			}
			collectQueries(x, out)
		}
	case []any:
		for _, x := range v {
			collectQueries(x, out)
		}
	}
}
