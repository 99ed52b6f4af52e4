package nodesim_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/etcd-conductor/etcd-conductor/test/framework"
	"github.com/etcd-conductor/etcd-conductor/tls/testpki"
)

// etcdStatefulSet is a 3-member etcd with mTLS on both sides, shaped like
// the operator's: Parallel pods, OnDelete, a headless peer Service that
// publishes not-ready addresses, a data volume claim per member.
func etcdStatefulSet(ns string, replicas int32) (*appsv1.StatefulSet, *corev1.Service) {
	labels := map[string]string{"app": "etcd"}
	var initial []string
	for i := 0; i < int(replicas); i++ {
		initial = append(initial, fmt.Sprintf("etcd-%d=https://etcd-%d.etcd-peer.%s.svc:2380", i, i, ns))
	}
	field := func(name, path string) corev1.EnvVar {
		return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}}
	}
	secretVol := func(name, secret string) corev1.Volume {
		return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: secret, DefaultMode: ptr(int32(0o640))}}}
	}
	self := "$(POD_NAME).etcd-peer.$(POD_NAMESPACE).svc"
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "etcd", Namespace: ns},
		Spec: appsv1.StatefulSetSpec{
			Replicas:            &replicas,
			Selector:            &metav1.LabelSelector{MatchLabels: labels},
			ServiceName:         "etcd-peer",
			PodManagementPolicy: appsv1.ParallelPodManagement,
			UpdateStrategy:      appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: ptr(int64(30)),
					Containers: []corev1.Container{{
						Name:    "etcd",
						Image:   "quay.io/coreos/etcd:v3.6.8",
						Command: []string{"/usr/local/bin/etcd"},
						Args: []string{
							"--name=$(POD_NAME)",
							"--data-dir=/var/etcd/data/new.etcd",
							"--listen-client-urls=https://$(POD_IP):2379",
							"--advertise-client-urls=https://" + self + ":2379",
							"--listen-peer-urls=https://$(POD_IP):2380",
							"--initial-advertise-peer-urls=https://" + self + ":2380",
							"--listen-metrics-urls=http://$(POD_IP):8080",
							"--initial-cluster=" + strings.Join(initial, ","),
							"--initial-cluster-state=new",
							"--initial-cluster-token=nodesim-test",
							"--client-cert-auth", "--trusted-ca-file=/var/etcd/ssl/server/ca.crt",
							"--cert-file=/var/etcd/ssl/server/tls.crt", "--key-file=/var/etcd/ssl/server/tls.key",
							"--peer-client-cert-auth", "--peer-trusted-ca-file=/var/etcd/ssl/peer/ca.crt",
							"--peer-cert-file=/var/etcd/ssl/peer/tls.crt", "--peer-key-file=/var/etcd/ssl/peer/tls.key",
						},
						Env: []corev1.EnvVar{field("POD_NAME", "metadata.name"), field("POD_NAMESPACE", "metadata.namespace"), field("POD_IP", "status.podIP")},
						ReadinessProbe: &corev1.Probe{
							ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromInt32(8080)}},
							PeriodSeconds: 1, TimeoutSeconds: 2, FailureThreshold: 2,
						},
						VolumeMounts: []corev1.VolumeMount{
							{Name: "data", MountPath: "/var/etcd/data"},
							{Name: "server-tls", MountPath: "/var/etcd/ssl/server", ReadOnly: true},
							{Name: "peer-tls", MountPath: "/var/etcd/ssl/peer", ReadOnly: true},
						},
					}},
					Volumes: []corev1.Volume{secretVol("server-tls", "etcd-server-tls"), secretVol("peer-tls", "etcd-peer-tls")},
				},
			},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: "data"},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
				},
			}},
		},
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "etcd-peer", Namespace: ns},
		Spec: corev1.ServiceSpec{
			ClusterIP:                corev1.ClusterIPNone,
			PublishNotReadyAddresses: true,
			Selector:                 labels,
			Ports:                    []corev1.ServicePort{{Name: "peer", Port: 2380}, {Name: "client", Port: 2379}},
		},
	}
	return sts, svc
}

func TestEtcdStatefulSetFormsClusterAndSurvivesPodRecreation(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	ns := e.namespace(t)
	pki, err := testpki.NewEtcdPKI("etcd", ns)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range pki.Secrets(ns, testpki.DefaultSecretNames("etcd")) {
		if _, err := e.client.CoreV1().Secrets(ns).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	sts, svc := etcdStatefulSet(ns, 3)
	if _, err := e.client.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.AppsV1().StatefulSets(ns).Create(ctx, sts, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	members := []string{"etcd-0", "etcd-1", "etcd-2"}
	for _, m := range members {
		e.waitReady(t, ns, m)
	}

	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pki.CA.CertPEM)
	cert, err := tls.X509KeyPair(pki.Client.CertPEM, pki.Client.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	newClient := func(t *testing.T) *clientv3.Client {
		// Members are dialled by their cluster DNS names, which the host
		// resolves through the simulator; TLS verifies those names.
		var endpoints []string
		for _, m := range members {
			endpoints = append(endpoints, "https://"+testpki.MemberServerName(m, "etcd", ns)+":2379")
		}
		c, err := clientv3.New(clientv3.Config{
			Endpoints:   endpoints,
			DialTimeout: 5 * time.Second,
			TLS:         &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}},
			DialOptions: []grpc.DialOption{grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
				return e.sim.DialContext(ctx, "tcp", addr)
			})},
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}

	c := newClient(t)
	opCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	list, err := c.MemberList(opCtx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Members) != 3 {
		t.Fatalf("member list has %d members, want 3: %v", len(list.Members), list.Members)
	}
	if _, err := c.Put(opCtx, "nodesim", "before"); err != nil {
		t.Fatal(err)
	}

	old := e.getPod(t, ns, "etcd-1")
	if err := e.client.CoreV1().Pods(ns).Delete(ctx, "etcd-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitPod(t, ns, "etcd-1", "recreated and ready", func(p *corev1.Pod) bool {
		return p.UID != old.UID && framework.PodReady(p)
	})
	// sameCluster checks that every member rejoined from its volume rather than starting a new cluster.
	sameCluster := func(ctx context.Context, t *testing.T, c *clientv3.Client) {
		t.Helper()
		for _, m := range members {
			st, err := c.Status(ctx, "https://"+testpki.MemberServerName(m, "etcd", ns)+":2379")
			if err != nil {
				t.Fatalf("status of %s: %v", m, err)
			}
			if st.Header.ClusterId != list.Header.ClusterId {
				t.Errorf("%s is in cluster %x, want %x (it must rejoin from its volume, not start a new cluster)", m, st.Header.ClusterId, list.Header.ClusterId)
			}
		}
	}
	c2 := newClient(t)
	opCtx, cancel = context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	sameCluster(opCtx, t, c2)
	got, err := c2.Get(opCtx, "nodesim")
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Kvs) != 1 || string(got.Kvs[0].Value) != "before" {
		t.Errorf("value after member recreation: %v", got.Kvs)
	}
	if ips := e.sim.Resolve("etcd-2.etcd-peer." + ns + ".svc"); len(ips) != 1 {
		t.Errorf("host-side resolution of etcd-2: %v", ips)
	}

	// What an operator upgrade to restricted pods does to a cluster that ran as root: each member
	// restarts as a non-root user on its root-owned data, which fsGroup must hand over to it.
	t.Run("members restarted as non-root keep their root-written data", func(t *testing.T) {
		current, err := e.client.AppsV1().StatefulSets(ns).Get(ctx, "etcd", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		const uid = int64(65532)
		current.Spec.Template.Spec.SecurityContext = &corev1.PodSecurityContext{
			RunAsNonRoot: ptr(true), RunAsUser: ptr(uid), RunAsGroup: ptr(uid), FSGroup: ptr(uid),
			FSGroupChangePolicy: ptr(corev1.FSGroupChangeOnRootMismatch),
		}
		current.Spec.Template.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{
			AllowPrivilegeEscalation: ptr(false), ReadOnlyRootFilesystem: ptr(true),
			Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		}
		if _, err := e.client.AppsV1().StatefulSets(ns).Update(ctx, current, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		for _, m := range members {
			old := e.getPod(t, ns, m)
			if err := e.client.CoreV1().Pods(ns).Delete(ctx, m, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			e.waitPod(t, ns, m, "recreated as non-root and ready", func(p *corev1.Pod) bool {
				return p.UID != old.UID && framework.PodReady(p) && p.Spec.SecurityContext != nil
			})
		}
		c3 := newClient(t)
		opCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		got, err := c3.Get(opCtx, "nodesim")
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Kvs) != 1 || string(got.Kvs[0].Value) != "before" {
			t.Errorf("value after the switch to non-root: %v", got.Kvs)
		}
		if _, err := c3.Put(opCtx, "nodesim", "after"); err != nil {
			t.Errorf("writing after the switch to non-root: %v", err)
		}
		sameCluster(opCtx, t, c3)
		for _, m := range members {
			dir, err := e.sim.ClaimDir(ctx, ns+"/data-"+m)
			if err != nil {
				t.Fatal(err)
			}
			fi, err := os.Stat(filepath.Join(dir, "new.etcd", "member", "wal"))
			if err != nil {
				t.Fatal(err)
			}
			if gid := fi.Sys().(*syscall.Stat_t).Gid; int64(gid) != uid {
				t.Errorf("%s: the root-written WAL directory has group %d, want fsGroup %d", m, gid, uid)
			}
		}
	})
}
