package helm

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/etcd-conductor/etcd-conductor/internal/features"
)

func TestLint(t *testing.T) {
	cases := []struct {
		name   string
		values []string
	}{
		{name: "defaults"},
		{name: "gate on with member client TLS", values: []string{"ondelete-tls.values.yaml"}},
		{name: "replicas with monitoring", values: []string{"ha-monitoring.values.yaml"}},
		{name: "namespaced", values: []string{"namespaced.values.yaml"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// Without the version a source-built helm assumes 1.20, and lint stops at the chart's
			// version check instead of linting the rest.
			args := []string{"lint", "--strict", chartDir(t), "--namespace", releaseNamespace, "--kube-version", kubeVersion}
			for _, v := range tc.values {
				args = append(args, "--values", testdataPath(t, v))
			}
			if _, err := runHelm(t, args...); err != nil {
				t.Fatalf("lint failed: %v", err)
			}
		})
	}
}

// A values mistake must stop the install with a message that names the mistake, rather than
// render a configuration the manager rejects at start-up (or, worse, silently ignores).
func TestInvalidValuesAreRejected(t *testing.T) {
	cases := []struct {
		name   string
		values string
		want   []string // substrings of helm's error, each naming the mistake
	}{
		{
			name:   "unknown log level",
			values: "logLevel: verbose\n",
			want:   []string{"/logLevel", "debug", "info", "error"},
		},
		{
			name:   "digest that is no sha256",
			values: "image:\n  digest: latest\n",
			want:   []string{"/image/digest"},
		},
		{
			name:   "misspelled feature gate",
			values: "featureGates:\n  QuorumAwareUpdatesWithOnDlete: true\n",
			want:   []string{"/featureGates", "QuorumAwareUpdatesWithOnDlete", "not allowed"},
		},
		{
			name:   "feature gate as a string",
			values: "featureGates:\n  QuorumAwareUpdatesWithOnDelete: \"yes\"\n",
			want:   []string{"/featureGates/QuorumAwareUpdatesWithOnDelete", "want boolean"},
		},
		{
			name:   "unknown member role source",
			values: "controllers:\n  ondelete:\n    memberRoleSource: Sometimes\n",
			want:   []string{"/controllers/ondelete/memberRoleSource", "Auto", "LeaseOnly"},
		},
		{
			name:   "misspelled controller setting",
			values: "controllers:\n  etcd:\n    concurentSyncs: 2\n",
			want:   []string{"/controllers/etcd", "concurentSyncs", "not allowed"},
		},
		{
			name:   "zero concurrent syncs",
			values: "controllers:\n  ondelete:\n    concurrentSyncs: 0\n",
			want:   []string{"/controllers/ondelete/concurrentSyncs"},
		},
		{
			name:   "concurrency beyond any headroom",
			values: "controllers:\n  ondelete:\n    maxConcurrentMemberUpdates: 5\n",
			want:   []string{"/controllers/ondelete/maxConcurrentMemberUpdates"},
		},
		{
			name:   "applied index lag below -1",
			values: "controllers:\n  ondelete:\n    maxAppliedIndexLag: -5\n",
			want:   []string{"/controllers/ondelete/maxAppliedIndexLag"},
		},
		{
			name:   "misspelled handover key",
			values: "controllers:\n  ondelete:\n    handover:\n      enable: false\n",
			want:   []string{"/controllers/ondelete/handover", "enable", "not allowed"},
		},
		{
			name:   "handover timeout not a duration",
			values: "controllers:\n  ondelete:\n    handover:\n      timeout: soon\n",
			want:   []string{"/controllers/ondelete/handover/timeout"},
		},
		{
			name:   "zero client qps",
			values: "clientConnection:\n  qps: 0\n",
			want:   []string{"/clientConnection/qps"},
		},
		{
			name:   "misspelled client connection setting",
			values: "clientConnection:\n  QPS: 50\n",
			want:   []string{"/clientConnection", "QPS", "not allowed"},
		},
		{
			name:   "client burst below qps",
			values: "clientConnection:\n  qps: 200\n  burst: 150\n",
			want:   []string{"clientConnection.burst (150) must be at least clientConnection.qps (200)"},
		},
		{
			name:   "misspelled top-level key",
			values: "memberClientTls:\n  secretName: x\n",
			want:   []string{"memberClientTls", "not allowed"},
		},
		{
			name:   "replicas without leader election",
			values: "replicaCount: 2\nleaderElection:\n  enabled: false\n",
			want:   []string{"replicaCount > 1 requires leaderElection.enabled=true"},
		},
		{
			name:   "service monitor without a verifiable metrics certificate",
			values: "metrics:\n  serviceMonitor:\n    enabled: true\n",
			want:   []string{"metrics.serviceMonitor.enabled=true requires metrics.tls.secretName"},
		},
		{
			name:   "watch namespace that is no namespace name",
			values: "watchNamespaces: [Team_A]\n",
			want:   []string{"/watchNamespaces/0", "does not match pattern"},
		},
		{
			name:   "watch namespace listed twice",
			values: "watchNamespaces: [team-a, team-a]\n",
			want:   []string{"/watchNamespaces", "are equal"},
		},
		{
			name:   "service monitor without metrics service",
			values: "metrics:\n  service:\n    enabled: false\n  serviceMonitor:\n    enabled: true\n",
			want:   []string{"metrics.serviceMonitor.enabled=true requires metrics.service.enabled=true"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := runHelm(t, templateArgs(t, []string{writeValues(t, tc.values)})...)
			if err == nil {
				t.Fatalf("helm template accepted the values; rendered:\n%s", out)
			}
			for _, want := range tc.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error does not mention %q:\n%v", want, err)
				}
			}
		})
	}
}

// The schema is what rejects a misspelled gate at install time, so it must list exactly the
// gates the manager knows: a new gate added to internal/features without the schema would be
// refused by helm, and a gate left in the schema after its removal would crash the manager.
func TestSchemaFeatureGatesMatchKnownGates(t *testing.T) {
	schema := readSchema(t)
	gates := schemaObject(t, schema, "properties", "featureGates")
	if gates["additionalProperties"] != false {
		t.Errorf("featureGates must set additionalProperties: false, got %v", gates["additionalProperties"])
	}
	props := schemaObject(t, gates, "properties")
	var names []string
	for name, spec := range props {
		names = append(names, name)
		if typ := spec.(map[string]any)["type"]; typ != "boolean" {
			t.Errorf("featureGates.%s has type %v, want boolean", name, typ)
		}
	}
	slices.Sort(names)
	if known := features.KnownNames(); !slices.Equal(names, known) {
		t.Errorf("schema gates %v, internal/features knows %v", names, known)
	}
}

// A key the schema does not define must be an error at every level the chart defines; only the
// Kubernetes-typed free-form objects (affinity, tolerations, string maps) are exempt.
func TestSchemaObjectsRejectUnknownKeys(t *testing.T) {
	var walk func(path string, node map[string]any)
	walk = func(path string, node map[string]any) {
		if props, ok := node["properties"].(map[string]any); ok {
			if node["additionalProperties"] != false {
				t.Errorf("%s defines properties but not additionalProperties: false", path)
			}
			for name, child := range props {
				if m, ok := child.(map[string]any); ok {
					walk(path+"."+name, m)
				}
			}
		}
		if items, ok := node["items"].(map[string]any); ok {
			walk(path+"[]", items)
		}
	}
	walk("values", readSchema(t))
}

func readSchema(t *testing.T) map[string]any {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(chartDir(t), "values.schema.json"))
	if err != nil {
		t.Fatalf("reading values schema: %v", err)
	}
	var schema map[string]any
	if err := json.Unmarshal(data, &schema); err != nil {
		t.Fatalf("parsing values schema: %v", err)
	}
	return schema
}

func schemaObject(t *testing.T, node map[string]any, path ...string) map[string]any {
	t.Helper()
	for _, key := range path {
		next, ok := node[key].(map[string]any)
		if !ok {
			t.Fatalf("values schema has no object at %s", strings.Join(path, "."))
		}
		node = next
	}
	return node
}
