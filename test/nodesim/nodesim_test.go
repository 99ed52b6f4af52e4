package nodesim_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/etcd-conductor/etcd-conductor/test/framework"
	"github.com/etcd-conductor/etcd-conductor/test/localcluster"
	"github.com/etcd-conductor/etcd-conductor/test/nodesim"
)

const helperImage = "nodesim.test/helper:v1"

// env is one control plane plus one simulator, shared by the subtests of a
// top-level test; each subtest works in its own namespace.
type env struct {
	client  kubernetes.Interface
	sim     *nodesim.Simulator
	cluster *localcluster.Cluster
	// gateway is the host's address on the pod network: what pods see host traffic come from.
	gateway string
}

func newEnv(t *testing.T, mutate func(*nodesim.Options)) *env {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("nodesim needs root for network namespaces")
	}
	localcluster.SkipWithoutBinaries(t, "")
	network := nodesim.NetworkForTest(t)
	cluster := localcluster.StartForTest(t, localcluster.Options{BindAddress: network.GatewayIP()})
	cfg := cluster.RESTConfig()
	cfg.QPS, cfg.Burst = 200, 400
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	host, port := cluster.APIServerHost()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	controlAddr := ln.Addr().String()
	ln.Close()
	o := nodesim.Options{
		ControlAddr:      controlAddr,
		NodeName:         "sim-node",
		Client:           client,
		Network:          network,
		Images:           map[string]string{"nodesim.test/helper": self},
		APIServerHost:    host,
		APIServerPort:    port,
		BackoffBase:      500 * time.Millisecond,
		BackoffMax:       4 * time.Second,
		VolumeSyncPeriod: time.Second,
	}
	if mutate != nil {
		mutate(&o)
	}
	sim := nodesim.StartForTest(t, o)
	return &env{client: client, sim: sim, cluster: cluster, gateway: network.GatewayIP()}
}

func (e *env) namespace(t *testing.T) string {
	t.Helper()
	name := strings.ToLower(t.Name())
	name = strings.Join(strings.FieldsFunc(name, func(r rune) bool { return (r < 'a' || r > 'z') && (r < '0' || r > '9') }), "-")
	if len(name) > 60 {
		name = name[len(name)-60:]
	}
	name = strings.Trim(name, "-")
	ctx := context.Background()
	if _, err := framework.CreateNamespace(ctx, e.cluster.Client(), name, nil); err != nil {
		t.Fatal(err)
	}
	// Pods are admitted only once the namespace's default ServiceAccount exists.
	waitFor(t, 30*time.Second, "default service account", func() (bool, string) {
		_, err := e.client.CoreV1().ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, fmt.Sprint(err)
	})
	return name
}

// waitFor polls cond until it holds; the timeout only bounds a broken run,
// it is not what the test asserts.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	framework.Eventually(t, timeout, what, func(context.Context) (bool, string) { return cond() })
}

func helperPod(ns, name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": "helper"}},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr(int64(10)),
			Containers: []corev1.Container{{
				Name:    "main",
				Image:   helperImage,
				Command: []string{"/helper"},
				Args:    []string{"--name=$(POD_NAME)", "--literal=$$(POD_NAME)"},
				Env: []corev1.EnvVar{
					{Name: "NODESIM_TEST_HELPER", Value: "1"},
					{Name: "PORT", Value: "8080"},
					{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
					{Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
					{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
					{Name: "GREETING", Value: "hello-$(POD_NAME)"},
				},
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
				ReadinessProbe: &corev1.Probe{
					ProbeHandler:     corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("http")}},
					PeriodSeconds:    1,
					FailureThreshold: 1,
				},
			}},
		},
	}
}

func ptr[T any](v T) *T { return &v }

func (e *env) createPod(t *testing.T, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	created, err := e.client.CoreV1().Pods(pod.Namespace).Create(context.Background(), pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return created
}

func (e *env) getPod(t *testing.T, ns, name string) *corev1.Pod {
	t.Helper()
	p, err := e.client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func describe(p *corev1.Pod) string {
	var b strings.Builder
	fmt.Fprintf(&b, "phase=%s ready=%v ip=%s", p.Status.Phase, framework.PodReady(p), p.Status.PodIP)
	for _, cs := range p.Status.ContainerStatuses {
		switch {
		case cs.State.Waiting != nil:
			fmt.Fprintf(&b, " %s=Waiting(%s: %s)", cs.Name, cs.State.Waiting.Reason, cs.State.Waiting.Message)
		case cs.State.Running != nil:
			fmt.Fprintf(&b, " %s=Running", cs.Name)
		case cs.State.Terminated != nil:
			fmt.Fprintf(&b, " %s=Terminated(%d %s)", cs.Name, cs.State.Terminated.ExitCode, cs.State.Terminated.Reason)
		}
		fmt.Fprintf(&b, " restarts=%d containerReady=%v", cs.RestartCount, cs.Ready)
	}
	return b.String()
}

func (e *env) waitPod(t *testing.T, ns, name, what string, cond func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	waitFor(t, 60*time.Second, name+" "+what, func() (bool, string) {
		p, err := e.client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		pod = p
		return cond(p), describe(p)
	})
	return pod
}

func (e *env) waitReady(t *testing.T, ns, name string) *corev1.Pod {
	t.Helper()
	return e.waitPod(t, ns, name, "ready", framework.PodReady)
}

// get fetches a helper endpoint of a pod from the host, over the bridge.
func get(t *testing.T, ip, path string, q url.Values) (int, string) {
	t.Helper()
	u := url.URL{Scheme: "http", Host: net.JoinHostPort(ip, "8080"), Path: path, RawQuery: q.Encode()}
	client := http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get(u.String())
	if err != nil {
		t.Fatalf("GET %s: %v", u.String(), err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func readFile(t *testing.T, ip, path string) string {
	t.Helper()
	code, body := get(t, ip, "/file", url.Values{"path": {path}})
	if code != http.StatusOK {
		t.Fatalf("reading %s in pod: %d %s", path, code, body)
	}
	return body
}

func TestSimulator(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()

	t.Run("node is registered and ready with a lease", func(t *testing.T) {
		node, err := e.client.CoreV1().Nodes().Get(ctx, "sim-node", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ready := false
		for _, c := range node.Status.Conditions {
			ready = ready || (c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue)
		}
		if !ready {
			t.Errorf("node conditions %+v: want Ready=True", node.Status.Conditions)
		}
		if _, err := e.client.CoordinationV1().Leases("kube-node-lease").Get(ctx, "sim-node", metav1.GetOptions{}); err != nil {
			t.Errorf("node lease: %v", err)
		}
	})

	t.Run("pod runs with env, volumes and token and becomes ready by http probe", func(t *testing.T) {
		ns := e.namespace(t)
		_, err := e.client.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "creds", Namespace: ns},
			Data:       map[string][]byte{"user": []byte("alice"), "pass": []byte("s3cret")},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		_, err = e.client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: "conf", Namespace: ns},
			Data:       map[string]string{"mode": "fast", "level": "3"},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pod := helperPod(ns, "web")
		c := &pod.Spec.Containers[0]
		c.Env = append(c.Env,
			corev1.EnvVar{Name: "SECRET_USER", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}, Key: "user"}}},
			corev1.EnvVar{Name: "CONF_MODE", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "conf"}, Key: "mode"}}},
		)
		c.EnvFrom = []corev1.EnvFromSource{{Prefix: "CM_", ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "conf"}}}}
		c.VolumeMounts = []corev1.VolumeMount{
			{Name: "secret", MountPath: "/etc/nodesim-test/secret", ReadOnly: true},
			{Name: "conf", MountPath: "/etc/nodesim-test/conf"},
			{Name: "podinfo", MountPath: "/etc/nodesim-test/podinfo"},
			{Name: "scratch", MountPath: "/nodesim-test/scratch"},
		}
		pod.Spec.Volumes = []corev1.Volume{
			{Name: "secret", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "creds", Items: []corev1.KeyToPath{{Key: "pass", Path: "password"}}}}},
			{Name: "conf", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "conf"}}}},
			{Name: "podinfo", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{Items: []corev1.DownwardAPIVolumeFile{
				{Path: "name", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}},
				{Path: "labels", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels"}},
			}}}},
			{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		}
		e.createPod(t, pod)
		got := e.waitReady(t, ns, "web")

		if got.Status.Phase != corev1.PodRunning || got.Status.PodIP == "" || got.Status.StartTime == nil {
			t.Errorf("status: %s startTime=%v", describe(got), got.Status.StartTime)
		}
		cs := got.Status.ContainerStatuses[0]
		if cs.State.Running == nil || !cs.Ready || cs.Started == nil || !*cs.Started || cs.Image != helperImage || cs.ImageID == "" || cs.ContainerID == "" {
			t.Errorf("container status %+v", cs)
		}
		for _, want := range []corev1.PodConditionType{corev1.PodScheduled, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady} {
			found := false
			for _, c := range got.Status.Conditions {
				found = found || (c.Type == want && c.Status == corev1.ConditionTrue)
			}
			if !found {
				t.Errorf("condition %s not True in %+v", want, got.Status.Conditions)
			}
		}
		ip := got.Status.PodIP
		if sip, err := e.sim.PodIP(ns + "/web"); err != nil || sip != ip {
			t.Errorf("PodIP() = %q, %v; status says %q", sip, err, ip)
		}

		_, envJSON := get(t, ip, "/env", nil)
		host, port := e.cluster.APIServerHost()
		for _, want := range []string{
			"POD_NAME=web", "POD_IP=" + ip, "GREETING=hello-web", "SECRET_USER=alice", "CONF_MODE=fast",
			"CM_level=3", "CM_mode=fast", "HOSTNAME=web",
			"KUBERNETES_SERVICE_HOST=" + host, fmt.Sprintf("KUBERNETES_SERVICE_PORT=%d", port),
		} {
			if !strings.Contains(envJSON, `"`+want+`"`) {
				t.Errorf("env lacks %s: %s", want, envJSON)
			}
		}
		if _, args := get(t, ip, "/args", nil); !strings.Contains(args, `"--name=web"`) || !strings.Contains(args, `"--literal=$(POD_NAME)"`) {
			t.Errorf("args not expanded like kubelet: %s", args)
		}
		if _, h := get(t, ip, "/hostname", nil); h != "web" {
			t.Errorf("hostname %q, want web", h)
		}
		files := map[string]string{
			"/etc/nodesim-test/secret/password":                       "s3cret",
			"/etc/nodesim-test/conf/mode":                             "fast",
			"/etc/nodesim-test/podinfo/name":                          "web",
			"/etc/nodesim-test/podinfo/labels":                        `app="helper"`,
			"/var/run/secrets/kubernetes.io/serviceaccount/namespace": ns,
		}
		for path, want := range files {
			if got := readFile(t, ip, path); got != want {
				t.Errorf("%s = %q, want %q", path, got, want)
			}
		}
		if code, _ := get(t, ip, "/file", url.Values{"path": {"/etc/nodesim-test/secret/user"}}); code != http.StatusNotFound {
			t.Errorf("secret key outside items is mounted (status %d)", code)
		}
		token := readFile(t, ip, "/var/run/secrets/kubernetes.io/serviceaccount/token")
		if strings.Count(token, ".") != 2 {
			t.Errorf("token does not look like a JWT: %q", token)
		}
		caWant, err := os.ReadFile(e.cluster.CAFile())
		if err != nil {
			t.Fatal(err)
		}
		if ca := readFile(t, ip, "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"); ca != string(caWant) {
			t.Errorf("ca.crt differs from the cluster CA")
		}
		if code, body := get(t, ip, "/write", url.Values{"path": {"/nodesim-test/scratch/x"}, "data": {"1"}}); code != http.StatusOK {
			t.Errorf("emptyDir not writable: %s", body)
		}
		if code, _ := get(t, ip, "/write", url.Values{"path": {"/etc/nodesim-test/secret/new"}, "data": {"1"}}); code == http.StatusOK {
			t.Errorf("readOnly mount is writable")
		}

		t.Run("in-cluster config reaches the API with the pod's token", func(t *testing.T) {
			// Not the aggregated "view" ClusterRole: the aggregation controller does not run here.
			_, err := e.client.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{
				ObjectMeta: metav1.ObjectMeta{Name: "pod-reader", Namespace: ns},
				Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}}},
			}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			_, err = e.client.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: "default-reads-pods", Namespace: ns},
				RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "pod-reader"},
				Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "default", Namespace: ns}},
			}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			waitFor(t, 20*time.Second, "pod reads itself through the API", func() (bool, string) {
				code, body := get(t, ip, "/whoami", nil)
				return code == http.StatusOK && body == string(got.UID), fmt.Sprintf("%d %s", code, body)
			})
		})

		t.Run("secret and configmap updates reach the running container", func(t *testing.T) {
			s, err := e.client.CoreV1().Secrets(ns).Get(ctx, "creds", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			s.Data["pass"] = []byte("rotated")
			if _, err := e.client.CoreV1().Secrets(ns).Update(ctx, s, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			waitFor(t, 30*time.Second, "rotated secret in pod", func() (bool, string) {
				v := readFile(t, ip, "/etc/nodesim-test/secret/password")
				return v == "rotated", v
			})
		})
	})

	t.Run("init containers run to completion first", func(t *testing.T) {
		ns := e.namespace(t)
		pod := helperPod(ns, "initialised")
		pod.Spec.Volumes = []corev1.Volume{{Name: "work", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
		mount := []corev1.VolumeMount{{Name: "work", MountPath: "/nodesim-test/work"}}
		pod.Spec.InitContainers = []corev1.Container{
			{Name: "first", Image: helperImage, Command: []string{"/bin/sh", "-c", "echo one > /nodesim-test/work/log"}, VolumeMounts: mount},
			{Name: "second", Image: helperImage, Command: []string{"sh", "-c", "echo two >> /nodesim-test/work/log"}, VolumeMounts: mount},
		}
		pod.Spec.Containers[0].VolumeMounts = mount
		e.createPod(t, pod)
		got := e.waitReady(t, ns, "initialised")
		if body := readFile(t, got.Status.PodIP, "/nodesim-test/work/log"); body != "one\ntwo\n" {
			t.Errorf("init containers wrote %q", body)
		}
		for _, cs := range got.Status.InitContainerStatuses {
			if cs.State.Terminated == nil || cs.State.Terminated.ExitCode != 0 || cs.State.Terminated.Reason != "Completed" || !cs.Ready {
				t.Errorf("init container %s: %+v", cs.Name, cs.State)
			}
		}
	})

	t.Run("changing the image restarts the container with it", func(t *testing.T) {
		ns := e.namespace(t)
		e.createPod(t, helperPod(ns, "upgraded"))
		e.waitReady(t, ns, "upgraded")
		p := e.getPod(t, ns, "upgraded")
		p.Spec.Containers[0].Image = "nodesim.test/helper:v2"
		if _, err := e.client.CoreV1().Pods(ns).Update(ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		e.waitPod(t, ns, "upgraded", "running v2", func(p *corev1.Pod) bool {
			cs := p.Status.ContainerStatuses[0]
			return framework.PodReady(p) && cs.Image == "nodesim.test/helper:v2" && cs.RestartCount == 1
		})
	})

	t.Run("kill restarts the container and counts it", func(t *testing.T) {
		ns := e.namespace(t)
		e.createPod(t, helperPod(ns, "victim"))
		e.waitReady(t, ns, "victim")
		if err := e.sim.Kill(ns+"/victim", "main"); err != nil {
			t.Fatal(err)
		}
		got := e.waitPod(t, ns, "victim", "restarted once and ready", func(p *corev1.Pod) bool {
			return framework.PodReady(p) && p.Status.ContainerStatuses[0].RestartCount == 1
		})
		last := got.Status.ContainerStatuses[0].LastTerminationState.Terminated
		if last == nil || last.ExitCode != 137 || last.Reason != "Error" {
			t.Errorf("last termination %+v, want exit 137 Error", last)
		}
	})

	t.Run("crash on start goes into CrashLoopBackOff", func(t *testing.T) {
		ns := e.namespace(t)
		e.sim.CrashOnStart(ns+"/crasher", "main", true)
		e.createPod(t, helperPod(ns, "crasher"))
		e.waitPod(t, ns, "crasher", "in CrashLoopBackOff after restarts", func(p *corev1.Pod) bool {
			if len(p.Status.ContainerStatuses) == 0 {
				return false
			}
			cs := p.Status.ContainerStatuses[0]
			return cs.State.Waiting != nil && cs.State.Waiting.Reason == "CrashLoopBackOff" && cs.RestartCount >= 1 &&
				cs.LastTerminationState.Terminated != nil && cs.LastTerminationState.Terminated.ExitCode == 1
		})
		e.sim.CrashOnStart(ns+"/crasher", "main", false)
		e.waitReady(t, ns, "crasher")
	})

	t.Run("unknown image waits in ErrImagePull then ImagePullBackOff", func(t *testing.T) {
		ns := e.namespace(t)
		pod := helperPod(ns, "badimage")
		pod.Spec.Containers[0].Image = "example.invalid/nothing:v0"
		e.createPod(t, pod)
		seen := map[string]bool{}
		e.waitPod(t, ns, "badimage", "ErrImagePull and ImagePullBackOff", func(p *corev1.Pod) bool {
			for _, cs := range p.Status.ContainerStatuses {
				if cs.State.Waiting != nil {
					seen[cs.State.Waiting.Reason] = true
				}
			}
			return seen["ErrImagePull"] && seen["ImagePullBackOff"]
		})
		if p := e.getPod(t, ns, "badimage"); p.Status.Phase != corev1.PodPending || framework.PodReady(p) {
			t.Errorf("pod with a missing image: %s", describe(p))
		}
	})

	t.Run("delete sends SIGTERM and finalises the pod", func(t *testing.T) {
		ns := e.namespace(t)
		e.createPod(t, helperPod(ns, "doomed"))
		e.waitReady(t, ns, "doomed")
		logPath, err := e.sim.Logs(ns+"/doomed", "main")
		if err != nil {
			t.Fatal(err)
		}
		if err := e.client.CoreV1().Pods(ns).Delete(ctx, "doomed", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 60*time.Second, "pod gone", func() (bool, string) {
			_, err := e.client.CoreV1().Pods(ns).Get(ctx, "doomed", metav1.GetOptions{})
			return apierrors.IsNotFound(err), fmt.Sprint(err)
		})
		logs, err := os.ReadFile(logPath)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(logs), "received SIGTERM") {
			t.Errorf("container log lacks SIGTERM handling:\n%s", logs)
		}
		waitFor(t, 20*time.Second, "kubelet events for the pod", func() (bool, string) {
			events, err := e.client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err.Error()
			}
			seen := map[string]bool{}
			var reasons []string
			for _, ev := range events.Items {
				if ev.InvolvedObject.Name == "doomed" && ev.Source.Component == "kubelet" {
					seen[ev.Reason] = true
					reasons = append(reasons, ev.Reason)
				}
			}
			return seen["Started"] && seen["Killing"], strings.Join(reasons, ",")
		})
	})

	t.Run("a claim grows in place when its class allows expansion", func(t *testing.T) {
		ns := e.namespace(t)
		classes := map[string]bool{ns + "-expandable": true, ns + "-fixed": false}
		for name, allow := range classes {
			_, err := e.client.StorageV1().StorageClasses().Create(ctx, &storagev1.StorageClass{
				ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: "nodesim.etcd-conductor/hostpath", AllowVolumeExpansion: &allow,
			}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				_ = e.client.StorageV1().StorageClasses().Delete(context.Background(), name, metav1.DeleteOptions{})
			})
		}
		claims := e.client.CoreV1().PersistentVolumeClaims(ns)
		for _, class := range []string{"expandable", "fixed"} {
			_, err := claims.Create(ctx, &corev1.PersistentVolumeClaim{
				ObjectMeta: metav1.ObjectMeta{Name: "data-" + class, Namespace: ns},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					StorageClassName: ptr(ns + "-" + class),
					Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
				},
			}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
		}
		pod := helperPod(ns, "grower")
		pod.Spec.TerminationGracePeriodSeconds = ptr(int64(1))
		for i, class := range []string{"expandable", "fixed"} {
			pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: class, VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data-" + class}}})
			pod.Spec.Containers[0].VolumeMounts = append(pod.Spec.Containers[0].VolumeMounts, corev1.VolumeMount{Name: class, MountPath: fmt.Sprintf("/var/nodesim-test/v%d", i)})
		}
		e.createPod(t, pod)
		p := e.waitReady(t, ns, "grower")
		if code, body := get(t, p.Status.PodIP, "/write", url.Values{"path": {"/var/nodesim-test/v0/kept"}, "data": {"before"}}); code != http.StatusOK {
			t.Fatalf("write: %s", body)
		}
		grow := []byte(`{"spec":{"resources":{"requests":{"storage":"2Gi"}}}}`)
		// The apiserver's own admission refuses the class that does not allow it.
		if _, err := claims.Patch(ctx, "data-fixed", types.MergePatchType, grow, metav1.PatchOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("growing a claim of a class without expansion: %v, want Forbidden", err)
		}
		if _, err := claims.Patch(ctx, "data-expandable", types.MergePatchType, grow, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		want := resource.MustParse("2Gi")
		waitFor(t, 30*time.Second, "the claim's capacity at 2Gi", func() (bool, string) {
			c, err := claims.Get(ctx, "data-expandable", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			have := c.Status.Capacity[corev1.ResourceStorage]
			return have.Cmp(want) == 0 && len(c.Status.Conditions) == 0 && len(c.Status.AllocatedResourceStatuses) == 0,
				fmt.Sprintf("capacity %s, conditions %v, allocated %v", have.String(), c.Status.Conditions, c.Status.AllocatedResourceStatuses)
		})
		c, err := claims.Get(ctx, "data-expandable", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pv, err := e.client.CoreV1().PersistentVolumes().Get(ctx, c.Spec.VolumeName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if have := pv.Spec.Capacity[corev1.ResourceStorage]; have.Cmp(want) != 0 {
			t.Errorf("persistent volume capacity %s, want 2Gi", have.String())
		}
		if got := readFile(t, p.Status.PodIP, "/var/nodesim-test/v0/kept"); got != "before" {
			t.Errorf("data after the growth = %q", got)
		}
	})

	t.Run("persistent volume claim data survives pod recreation", func(t *testing.T) {
		ns := e.namespace(t)
		_, err := e.client.CoreV1().PersistentVolumeClaims(ns).Create(ctx, &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: "data-store", Namespace: ns},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
			},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		mk := func() *corev1.Pod {
			pod := helperPod(ns, "store")
			pod.Spec.TerminationGracePeriodSeconds = ptr(int64(1))
			pod.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data-store"}}}}
			pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/var/nodesim-test/data"}}
			return pod
		}
		first := e.createPod(t, mk())
		p := e.waitReady(t, ns, "store")
		if code, body := get(t, p.Status.PodIP, "/write", url.Values{"path": {"/var/nodesim-test/data/member/snap"}, "data": {"generation-1"}}); code != http.StatusOK {
			t.Fatalf("write: %s", body)
		}
		if err := e.client.CoreV1().Pods(ns).Delete(ctx, "store", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 60*time.Second, "old pod gone", func() (bool, string) {
			_, err := e.client.CoreV1().Pods(ns).Get(ctx, "store", metav1.GetOptions{})
			return apierrors.IsNotFound(err), fmt.Sprint(err)
		})
		second := e.createPod(t, mk())
		if second.UID == first.UID {
			t.Fatal("recreated pod has the old UID")
		}
		p = e.waitReady(t, ns, "store")
		if got := readFile(t, p.Status.PodIP, "/var/nodesim-test/data/member/snap"); got != "generation-1" {
			t.Errorf("data after recreation = %q", got)
		}
		pvc, err := e.client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data-store", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if pvc.Status.Phase != corev1.ClaimBound || pvc.Spec.VolumeName != "pvc-"+string(pvc.UID) {
			t.Errorf("claim phase %s volume %q, want Bound to pvc-%s", pvc.Status.Phase, pvc.Spec.VolumeName, pvc.UID)
		}
		pv, err := e.client.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		dir, err := e.sim.ClaimDir(ctx, ns+"/data-store")
		if err != nil {
			t.Fatal(err)
		}
		if pv.Status.Phase != corev1.VolumeBound || pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.UID != pvc.UID || pv.Spec.HostPath == nil || pv.Spec.HostPath.Path != dir {
			t.Errorf("persistent volume %+v", pv)
		}
		if b, err := os.ReadFile(dir + "/member/snap"); err != nil || string(b) != "generation-1" {
			t.Errorf("ClaimDir content %q, %v", b, err)
		}

		t.Run("a deleted and recreated claim starts empty", func(t *testing.T) {
			if err := e.client.CoreV1().Pods(ns).Delete(ctx, "store", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			waitFor(t, 60*time.Second, "pod gone", func() (bool, string) {
				_, err := e.client.CoreV1().Pods(ns).Get(ctx, "store", metav1.GetOptions{})
				return apierrors.IsNotFound(err), fmt.Sprint(err)
			})
			if err := e.client.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, "data-store", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			// Play the pvc-protection controller, which this control plane does not run.
			waitFor(t, 30*time.Second, "claim gone", func() (bool, string) {
				c, err := e.client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data-store", metav1.GetOptions{})
				if apierrors.IsNotFound(err) {
					return true, ""
				}
				if err == nil && len(c.Finalizers) > 0 {
					c.Finalizers = nil
					_, err = e.client.CoreV1().PersistentVolumeClaims(ns).Update(ctx, c, metav1.UpdateOptions{})
				}
				return false, fmt.Sprint(err)
			})
			// The PV may stay Terminating behind its pv-protection finalizer:
			// the controller that removes it does not run here either.
			waitFor(t, 30*time.Second, "old volume reclaimed", func() (bool, string) {
				old, pvErr := e.client.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{})
				deleted := apierrors.IsNotFound(pvErr) || (pvErr == nil && old.DeletionTimestamp != nil)
				_, dirErr := os.Stat(dir)
				return deleted && os.IsNotExist(dirErr), fmt.Sprintf("pv deleted: %v (%v), dir: %v", deleted, pvErr, dirErr)
			})
			_, err := e.client.CoreV1().PersistentVolumeClaims(ns).Create(ctx, &corev1.PersistentVolumeClaim{
				ObjectMeta: metav1.ObjectMeta{Name: "data-store", Namespace: ns},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
				},
			}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			e.createPod(t, mk())
			p := e.waitReady(t, ns, "store")
			if code, body := get(t, p.Status.PodIP, "/file", url.Values{"path": {"/var/nodesim-test/data/member/snap"}}); code != http.StatusNotFound {
				t.Errorf("new claim has old data: %d %q", code, body)
			}
		})
	})

	t.Run("partition fails the probe and heal restores it", func(t *testing.T) {
		ns := e.namespace(t)
		e.createPod(t, helperPod(ns, "island"))
		e.waitReady(t, ns, "island")
		if err := e.sim.Partition(ns + "/island"); err != nil {
			t.Fatal(err)
		}
		e.waitPod(t, ns, "island", "not ready while partitioned", func(p *corev1.Pod) bool { return !framework.PodReady(p) })
		if err := e.sim.Heal(ns + "/island"); err != nil {
			t.Fatal(err)
		}
		e.waitReady(t, ns, "island")
	})

	t.Run("a slow link delays the peer's packets both ways and heal lifts it", func(t *testing.T) {
		ns := e.namespace(t)
		p := e.waitReady(t, ns, e.createPod(t, helperPod(ns, "faraway")).Name)
		const delay = 200 * time.Millisecond
		// The host is the peer here: its packets come from the gateway address.
		if err := e.sim.DelayFrom(ns+"/faraway", delay, e.gateway); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			name     string
			heal     bool
			min, max time.Duration
		}{
			// A new connection crosses the link at least twice each way (handshake, request).
			{name: "delayed", min: 4 * delay, max: 4*delay + 2*time.Second},
			{name: "healed", heal: true, max: delay},
		} {
			t.Run(tc.name, func(t *testing.T) {
				if tc.heal {
					if err := e.sim.Heal(ns + "/faraway"); err != nil {
						t.Fatal(err)
					}
				}
				start := time.Now()
				code, body := get(t, p.Status.PodIP, "/healthz", nil)
				took := time.Since(start)
				t.Logf("GET /healthz took %s", took)
				if code != http.StatusOK || strings.TrimSpace(body) != "ok" {
					t.Fatalf("GET /healthz = %d %q: the delayed packets must arrive, not be dropped", code, body)
				}
				if took < tc.min || took > tc.max {
					t.Errorf("GET /healthz took %s, want between %s and %s", took, tc.min, tc.max)
				}
			})
		}
		if err := e.sim.DelayFrom(ns+"/faraway", 0, e.gateway); err == nil {
			t.Errorf("a zero delay was accepted")
		}
	})

	t.Run("control endpoint injects faults over HTTP", func(t *testing.T) {
		ns := e.namespace(t)
		created := e.waitReady(t, ns, e.createPod(t, helperPod(ns, "remote")).Name)
		q := url.Values{"pod": {ns + "/remote"}, "container": {"main"}}
		ip, err := nodesim.ControlRequest(ctx, e.sim.ControlAddr(), http.MethodGet, "/v1/pod-ip", q)
		if err != nil || ip != created.Status.PodIP {
			t.Errorf("pod-ip over HTTP = %q, %v; want %s", ip, err, created.Status.PodIP)
		}
		if _, err := nodesim.ControlRequest(ctx, e.sim.ControlAddr(), http.MethodPost, "/v1/fault/kill", q); err != nil {
			t.Fatal(err)
		}
		e.waitPod(t, ns, "remote", "restarted after HTTP kill", func(p *corev1.Pod) bool {
			return p.Status.ContainerStatuses[0].RestartCount == 1
		})
		if _, err := nodesim.ControlRequest(ctx, e.sim.ControlAddr(), http.MethodPost, "/v1/fault/kill", url.Values{"pod": {ns + "/nope"}, "container": {"main"}}); err == nil {
			t.Errorf("killing a pod that does not exist succeeded")
		}
		if _, err := nodesim.ControlRequest(ctx, e.sim.ControlAddr(), http.MethodPost, "/v1/fault/delay-from", url.Values{"pod": {ns + "/remote"}, "delay": {"soon"}}); err == nil {
			t.Errorf("a delay that is not a duration was accepted")
		}
	})

	t.Run("hang stops answering probes and resume brings it back", func(t *testing.T) {
		ns := e.namespace(t)
		e.createPod(t, helperPod(ns, "sleepy"))
		e.waitReady(t, ns, "sleepy")
		if err := e.sim.Hang(ns+"/sleepy", "main"); err != nil {
			t.Fatal(err)
		}
		e.waitPod(t, ns, "sleepy", "not ready while hung", func(p *corev1.Pod) bool { return !framework.PodReady(p) })
		if err := e.sim.Resume(ns+"/sleepy", "main"); err != nil {
			t.Fatal(err)
		}
		got := e.waitReady(t, ns, "sleepy")
		if n := got.Status.ContainerStatuses[0].RestartCount; n != 0 {
			t.Errorf("hang/resume restarted the container %d times", n)
		}
	})

	t.Run("liveness failure restarts the container", func(t *testing.T) {
		ns := e.namespace(t)
		pod := helperPod(ns, "sick")
		pod.Spec.TerminationGracePeriodSeconds = ptr(int64(1))
		pod.Spec.Containers[0].LivenessProbe = &corev1.Probe{
			ProbeHandler:     corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"sh", "-c", "test ! -e /tmp/nodesim-helper-unhealthy-$POD_NAME"}}},
			PeriodSeconds:    1,
			FailureThreshold: 2,
		}
		e.createPod(t, pod)
		e.waitReady(t, ns, "sick")
		// The marker lives in the host's /tmp, which pods share (no image
		// filesystem); the name is unique to this pod.
		marker := "/tmp/nodesim-helper-unhealthy-sick"
		if err := os.WriteFile(marker, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Remove(marker) })
		e.waitPod(t, ns, "sick", "restarted by liveness", func(p *corev1.Pod) bool {
			return p.Status.ContainerStatuses[0].RestartCount >= 1
		})
		os.Remove(marker)
		e.waitReady(t, ns, "sick")
	})

	t.Run("pod names resolve inside pods through the headless service", func(t *testing.T) {
		ns := e.namespace(t)
		_, err := e.client.CoreV1().Services(ns).Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "peers", Namespace: ns},
			Spec: corev1.ServiceSpec{
				ClusterIP:                corev1.ClusterIPNone,
				Selector:                 map[string]string{"app": "helper"},
				PublishNotReadyAddresses: true,
				Ports:                    []corev1.ServicePort{{Name: "http", Port: 8080}},
			},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ips := map[string]string{}
		for _, name := range []string{"member-0", "member-1"} {
			pod := helperPod(ns, name)
			pod.Spec.Hostname, pod.Spec.Subdomain = name, "peers"
			e.createPod(t, pod)
		}
		for _, name := range []string{"member-0", "member-1"} {
			ips[name] = e.waitReady(t, ns, name).Status.PodIP
		}
		cases := []struct{ from, name, want string }{
			{"member-0", "member-1.peers." + ns + ".svc.cluster.local", ips["member-1"]},
			{"member-0", "member-1.peers." + ns + ".svc", ips["member-1"]},
			{"member-1", "member-0.peers", ips["member-0"]},
			{"member-1", "member-1.peers." + ns + ".svc", ips["member-1"]},
		}
		for _, tc := range cases {
			t.Run(tc.from+" resolves "+tc.name, func(t *testing.T) {
				waitFor(t, 20*time.Second, tc.name, func() (bool, string) {
					code, body := get(t, ips[tc.from], "/resolve", url.Values{"name": {tc.name}})
					return code == http.StatusOK && body == tc.want, body
				})
				out, err := e.sim.Exec(ctx, ns+"/"+tc.from, "main", "getent", "hosts", tc.name)
				if err != nil || !strings.HasPrefix(string(out), tc.want+" ") {
					t.Errorf("getent hosts %s in %s: %q, %v", tc.name, tc.from, out, err)
				}
			})
		}
		t.Run("unknown names fail with NXDOMAIN from cluster DNS", func(t *testing.T) {
			code, body := get(t, ips["member-0"], "/resolve", url.Values{"name": {"member-9.peers." + ns + ".svc"}})
			if code == http.StatusOK || !strings.Contains(body, "no such host") {
				t.Errorf("resolving a missing member: %d %q, want no such host", code, body)
			}
		})
		if got := e.sim.Resolve("member-0.peers." + ns + ".svc"); len(got) != 1 || got[0] != ips["member-0"] {
			t.Errorf("host-side Resolve = %v, want %s", got, ips["member-0"])
		}
	})
}
