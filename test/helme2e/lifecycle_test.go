package helme2e

import (
	"context"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/specgate"
	"github.com/etcd-conductor/etcd-conductor/test/framework"
	"github.com/etcd-conductor/etcd-conductor/test/localcluster"
	"github.com/etcd-conductor/etcd-conductor/test/stack"
)

// shared is the one stack the package's tests stand on, one after the other: starting a control
// plane and the node simulator costs more than what most of these tests do on it, and make test
// is near its budget. Each test installs (and uninstalls) its own release; TestMain stops the
// stack.
var shared struct {
	once  sync.Once
	stack *stack.Stack
	err   error
}

// sharedStack starts the package's stack on first use (skipping, like stack.StartForTest, where
// it cannot run).
func sharedStack(t *testing.T) *stack.Stack {
	t.Helper()
	stack.RequireEnvironment(t)
	shared.once.Do(func() {
		// The chart's image runs from make image's archive (image.go): the manager and the member
		// pods start from the image's entrypoint in its unpacked layers.
		images, err := OCIImages()
		if err != nil {
			shared.err = err
			return
		}
		shared.stack, shared.err = stack.Start(context.Background(), stack.Options{OCIImages: images})
	})
	if shared.err != nil {
		t.Fatalf("starting the stack: %v", shared.err)
	}
	return shared.stack
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.stack != nil {
		if err := shared.stack.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stopping the stack: %v\n", err)
			if code == 0 {
				code = 1
			}
		}
	}
	os.Exit(code)
}

// crdMarkerColumn is the printer column the upgraded chart's Etcd CRD adds: what the API server
// serves after `helm upgrade` tells the new CRD from the old.
const crdMarkerColumn = "Upgraded-By-Test"

// The chart's lifecycle with CRDs it installs (crds.install=true): install, an Etcd with the
// cert-manager Secret layout (ca.crt, tls.crt, tls.key; docs/tls.md) Ready, then `helm upgrade`
// to a chart whose Etcd CRD changed. The API server serves the new CRD, and the Etcd comes
// through untouched: same object, same members and member IDs, still Ready, no member pod
// deleted or replaced, a key written before read after. The refusal to install over CRDs no
// release owns (etcd-druid's) is TestCRDLifecycleOnAPIServer's (test/helm), on a bare
// kube-apiserver, where it costs no stack.
func TestHelmUpgradeWithChangedCRDKeepsEtcds(t *testing.T) {
	requireHelm(t)
	s := sharedStack(t)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()

	// The stack applied the CRDs as a user with kubectl would; the release takes them over as
	// docs/upgrading.md tells users of an earlier chart to.
	if err := adoptCRDs(ctx, s.Client); err != nil {
		t.Fatal(err)
	}
	op, managerBefore := installForTest(ctx, t, s, InstallOptions{QuorumAware: true, Set: []string{"crds.install=true"}})

	cluster, err := s.CreateEtcd(ctx, "helm-lifecycle", "etcd", 3, framework.EtcdImage("3.6.8"))
	if err != nil {
		t.Fatal(err)
	}
	etcdBefore := waitEtcdReady(ctx, t, cluster)
	podsBefore, err := cluster.Pods(ctx)
	if err != nil {
		t.Fatal(err)
	}
	idsBefore := memberIDs(ctx, t, cluster)
	const key, value = "/helm-lifecycle/written-before-the-upgrade", "kept"
	withMember(ctx, t, cluster, func(ctx context.Context, m member) error {
		_, err := m.kv.Put(ctx, &pb.PutRequest{Key: []byte(key), Value: []byte(value)})
		return err
	})
	auditor, err := cluster.AuditDeletions(ctx, 1, nil)
	if err != nil {
		t.Fatal(err)
	}

	upgraded := chartWithChangedCRD(t)
	managerAfter, err := op.upgradeTo(ctx, upgraded)
	if err != nil {
		t.Fatalf("helm upgrade to a chart with a changed CRD: %v", err)
	}
	t.Logf("manager pod %s before the upgrade, %s after", managerBefore.Name, managerAfter.Name)

	t.Run("the API server serves the new CRD", func(t *testing.T) {
		crd, err := getCRD(ctx, s.Client, "etcds")
		if err != nil {
			t.Fatal(err)
		}
		if cols := printerColumns(crd); !slices.Contains(cols, crdMarkerColumn) {
			t.Errorf("Etcd CRD printer columns %v after the upgrade, want %s among them", cols, crdMarkerColumn)
		}
		if owner := crd.GetAnnotations()["meta.helm.sh/release-name"]; owner != ReleaseName {
			t.Errorf("Etcd CRD owned by release %q, want %q", owner, ReleaseName)
		}
	})

	t.Run("the manager still reconciles the Etcd", func(t *testing.T) {
		// etcd-druid's order to apply the spec now: the Etcd reconciler removes the annotation
		// once it has, which it can only do from a watch of Etcds through the new CRD. This also
		// gives the controllers a pass over the Etcd before the next checks; a deletion any of
		// them made shows in the audit.
		etcd := &druidv1alpha1.Etcd{}
		if err := s.Client.Get(ctx, client.ObjectKey{Namespace: cluster.Namespace, Name: cluster.Name}, etcd); err != nil {
			t.Fatal(err)
		}
		patch := client.MergeFrom(etcd.DeepCopy())
		if etcd.Annotations == nil {
			etcd.Annotations = map[string]string{}
		}
		etcd.Annotations[specgate.AnnotationOperation] = specgate.OperationReconcile
		if err := s.Client.Patch(ctx, etcd, patch); err != nil {
			t.Fatalf("ordering a reconcile: %v", err)
		}
		framework.Eventually(t, time.Minute, "the reconcile order carried out", func(ctx context.Context) (bool, string) {
			e, err := cluster.Get(ctx)
			if err != nil {
				return false, err.Error()
			}
			v, ok := e.Annotations[specgate.AnnotationOperation]
			return !ok, fmt.Sprintf("annotation %s=%s still set", specgate.AnnotationOperation, v)
		})
	})

	t.Run("the Etcd comes through untouched", func(t *testing.T) {
		etcdAfter := waitEtcdReady(ctx, t, cluster)
		if etcdAfter.UID != etcdBefore.UID {
			t.Errorf("Etcd UID %s after the upgrade, was %s: it was recreated", etcdAfter.UID, etcdBefore.UID)
		}
		if ids := memberIDs(ctx, t, cluster); !maps.Equal(ids, idsBefore) {
			t.Errorf("members after the upgrade %v, before %v", ids, idsBefore)
		}
		deletions, auditErr := auditor.Stop()
		if auditErr != nil {
			t.Errorf("deletion audit incomplete: %v", auditErr)
		}
		for _, d := range deletions {
			t.Errorf("pod %s deleted across the upgrade", d.Pod)
		}
		podsAfter, err := cluster.Pods(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, change := range stack.PodsChanged(podsBefore, podsAfter) {
			t.Errorf("across the upgrade: %s", change)
		}
		withMember(ctx, t, cluster, func(ctx context.Context, m member) error {
			// Linearizable (not Serializable): the quorum answers, not one member's copy.
			resp, err := m.kv.Range(ctx, &pb.RangeRequest{Key: []byte(key)})
			if err != nil {
				return err
			}
			if len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != value {
				return fmt.Errorf("key %s after the upgrade: %v, want %q", key, resp.Kvs, value)
			}
			return nil
		})
	})
	if log, err := op.ManagerLog(ctx); err != nil {
		t.Errorf("reading the manager log: %v", err)
	} else if strings.Contains(log, "forbidden") {
		t.Errorf("the API server refused the chart's ServiceAccount something:\n%s", forbiddenLines(log))
	}
}

// upgradeTo runs `helm upgrade --reuse-values` to another copy of the chart and waits until the
// Deployment has rolled out (a new chart version relabels the pod template, so the manager pod
// may be replaced).
func (op *Operator) upgradeTo(ctx context.Context, chart string) (*corev1.Pod, error) {
	if _, err := op.run(ctx, "upgrade", ReleaseName, chart, "--namespace", Namespace, "--reuse-values"); err != nil {
		return nil, err
	}
	return op.WaitManagerReady(ctx)
}

// chartWithChangedCRD copies the chart into a temp dir as a later version whose Etcd CRD has one
// more printer column: a CRD change as a release brings one, without a field the operator would
// have to know.
func chartWithChangedCRD(t *testing.T) string {
	t.Helper()
	root, err := localcluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	src, dst := filepath.Join(root, "charts", "etcd-conductor"), filepath.Join(t.TempDir(), "etcd-conductor")
	if err := copyDir(src, dst); err != nil {
		t.Fatalf("copying the chart: %v", err)
	}
	edit := func(rel, old, new string) {
		t.Helper()
		path := filepath.Join(dst, rel)
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(data), old) {
			t.Fatalf("%s holds no %q to change: the test's edit no longer fits the chart", rel, old)
		}
		if err := os.WriteFile(path, []byte(strings.Replace(string(data), old, new, 1)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// A later version of the chart, whatever this one's is.
	chartYAML := filepath.Join(dst, "Chart.yaml")
	data, err := os.ReadFile(chartYAML)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	i := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "version: ") })
	if i < 0 {
		t.Fatal("Chart.yaml has no version line")
	}
	lines[i] += "-crd-changed"
	if err := os.WriteFile(chartYAML, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	edit(filepath.Join("files", "crds", "druid.gardener.cloud_etcds.yaml"), "  - additionalPrinterColumns:\n",
		"  - additionalPrinterColumns:\n    - jsonPath: .metadata.uid\n      name: "+crdMarkerColumn+"\n      type: string\n      priority: 1\n")
	return dst
}

// copyDir copies the regular files and directories under src to dst.
func copyDir(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o644)
	})
}

var crdGVK = schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}

// getCRD reads a druid.gardener.cloud CRD by its plural.
func getCRD(ctx context.Context, c client.Client, plural string) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(crdGVK)
	if err := c.Get(ctx, client.ObjectKey{Name: plural + ".druid.gardener.cloud"}, u); err != nil {
		return nil, fmt.Errorf("reading CRD %s: %w", plural, err)
	}
	return u, nil
}

// adoptCRDs labels and annotates the CRDs as docs/upgrading.md's recipe does, so that the release
// installed next owns them.
func adoptCRDs(ctx context.Context, c client.Client) error {
	for _, plural := range []string{"etcds", "etcdopstasks", "etcdcopybackupstasks"} {
		u, err := getCRD(ctx, c, plural)
		if err != nil {
			return err
		}
		labels, annotations := u.GetLabels(), u.GetAnnotations()
		if labels == nil {
			labels = map[string]string{}
		}
		if annotations == nil {
			annotations = map[string]string{}
		}
		labels["app.kubernetes.io/managed-by"] = "Helm"
		annotations["meta.helm.sh/release-name"], annotations["meta.helm.sh/release-namespace"] = ReleaseName, Namespace
		u.SetLabels(labels)
		u.SetAnnotations(annotations)
		if err := c.Update(ctx, u); err != nil {
			return fmt.Errorf("adopting CRD %s: %w", plural, err)
		}
	}
	return nil
}

// printerColumns are the names of the printer columns of the CRD's first version.
func printerColumns(crd *unstructured.Unstructured) []string {
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	if len(versions) == 0 {
		return nil
	}
	v, _ := versions[0].(map[string]any)
	cols, _, _ := unstructured.NestedSlice(v, "additionalPrinterColumns")
	var names []string
	for _, c := range cols {
		if m, ok := c.(map[string]any); ok {
			names = append(names, fmt.Sprint(m["name"]))
		}
	}
	return names
}

// waitEtcdReady waits until the Etcd's status is ready with every member Ready and known by ID.
func waitEtcdReady(ctx context.Context, t *testing.T, c *stack.EtcdCluster) *druidv1alpha1.Etcd {
	t.Helper()
	var last *druidv1alpha1.Etcd
	framework.Eventually(t, 3*time.Minute, "the Etcd Ready", func(ctx context.Context) (bool, string) {
		e, err := c.Get(ctx)
		if err != nil {
			return false, err.Error()
		}
		last = e
		ready := 0
		for _, m := range e.Status.Members {
			if m.Status == "Ready" && m.ID != nil {
				ready++
			}
		}
		return e.Status.Ready != nil && *e.Status.Ready && ready == c.Replicas,
			fmt.Sprintf("ready %v, %d of %d members Ready with an ID", e.Status.Ready, ready, c.Replicas)
	})
	return last
}

// memberIDs asks the members who they are: name → member ID, the raft identity a replaced
// member would not keep.
func memberIDs(ctx context.Context, t *testing.T, c *stack.EtcdCluster) map[string]uint64 {
	t.Helper()
	ids := map[string]uint64{}
	withMember(ctx, t, c, func(ctx context.Context, m member) error {
		resp, err := m.cluster.MemberList(ctx, &pb.MemberListRequest{Linearizable: true})
		if err != nil {
			return err
		}
		for _, m := range resp.Members {
			ids[m.Name] = m.ID
		}
		return nil
	})
	if len(ids) != c.Replicas {
		t.Errorf("member list %v, want %d members", ids, c.Replicas)
	}
	return ids
}

// member is a gRPC connection to one member, as the workload's instruments dial them (no etcd
// client library: nothing retried behind the test's back).
type member struct {
	kv      pb.KVClient
	cluster pb.ClusterClient
}

// withMember runs f with an mTLS connection to the first member that has an address, with the
// client key pair of the Etcd's Secrets.
func withMember(ctx context.Context, t *testing.T, c *stack.EtcdCluster, f func(context.Context, member) error) {
	t.Helper()
	eps := c.Endpoints()()
	if len(eps) == 0 {
		t.Fatal("no member has an address")
	}
	tlsConfig, err := c.PKI.ClientMaterial().Config(eps[0].ServerName)
	if err != nil {
		t.Fatal(err)
	}
	cc, err := grpc.NewClient("passthrough:///"+eps[0].Address, grpc.WithTransportCredentials(credentials.NewTLS(tlsConfig)))
	if err != nil {
		t.Fatalf("connection to %s: %v", eps[0].Name, err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := f(ctx, member{kv: pb.NewKVClient(cc), cluster: pb.NewClusterClient(cc)}); err != nil {
		t.Fatalf("asking %s: %v", eps[0].Name, err)
	}
}
