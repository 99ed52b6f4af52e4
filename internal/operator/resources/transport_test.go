package resources

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/transport"
)

// TestPlaintextMembers: an Etcd without clientUrlTls or peerUrlTls runs members on plain HTTP
// for that traffic, as etcd-druid does: http URLs, no TLS settings and no Secret mounted for it,
// and the sidecars dial the member in plaintext. The other transport keeps its TLS.
func TestPlaintextMembers(t *testing.T) {
	for _, tt := range []struct {
		name              string
		mutate            func(e *druidv1alpha1.Etcd)
		client, peer      string
		wantVolumes       []string
		wantEnvTLS        []string // ETCD_* TLS settings present
		wantNoEnvTLS      []string // ETCD_* TLS settings absent
		wantAgentFlagSome string
	}{
		{"TLS", func(*druidv1alpha1.Etcd) {}, "https", "https",
			[]string{clientCAVolume, serverTLSVolume, clientTLSVolume, peerCAVolume, peerTLSVolume},
			[]string{"ETCD_CERT_FILE", "ETCD_PEER_CERT_FILE"}, nil, "--ca-file="},
		{"plain", func(e *druidv1alpha1.Etcd) { e.Spec.Etcd.ClientUrlTLS, e.Spec.Etcd.PeerUrlTLS = nil, nil }, "http", "http",
			nil, nil, []string{"ETCD_CERT_FILE", "ETCD_CLIENT_CERT_AUTH", "ETCD_PEER_CERT_FILE", "ETCD_PEER_SKIP_CLIENT_SAN_VERIFICATION"}, "--plaintext"},
		{"peer TLS only", func(e *druidv1alpha1.Etcd) { e.Spec.Etcd.ClientUrlTLS = nil }, "http", "https",
			[]string{peerCAVolume, peerTLSVolume}, []string{"ETCD_PEER_CERT_FILE"}, []string{"ETCD_CERT_FILE"}, "--plaintext"},
		{"client TLS only", func(e *druidv1alpha1.Etcd) { e.Spec.Etcd.PeerUrlTLS = nil }, "https", "http",
			[]string{clientCAVolume, serverTLSVolume, clientTLSVolume}, []string{"ETCD_CERT_FILE"}, []string{"ETCD_PEER_CERT_FILE"}, "--ca-file="},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := testEtcd(3)
			tt.mutate(e)
			if p := ValidateSpec(e); len(p) != 0 {
				t.Fatalf("refused: %v", p)
			}
			sts, err := StatefulSet(e, Settings{MemberAgentImage: "img"})
			if err != nil {
				t.Fatal(err)
			}
			spec := sts.Spec.Template.Spec
			var volumes []string
			for _, v := range spec.Volumes {
				if v.Secret != nil {
					volumes = append(volumes, v.Name)
				}
			}
			if !slices.Equal(volumes, tt.wantVolumes) {
				t.Errorf("Secret volumes %v, want %v", volumes, tt.wantVolumes)
			}
			mounted := map[string]bool{}
			for _, c := range append(spec.InitContainers, spec.Containers...) {
				for _, m := range c.VolumeMounts {
					mounted[m.Name] = true
				}
			}
			for _, v := range spec.Volumes {
				if v.Secret != nil && !mounted[v.Name] {
					t.Errorf("Secret volume %s is mounted by no container", v.Name)
				}
			}
			for _, c := range []corev1.Container{spec.InitContainers[0], spec.Containers[1]} {
				if !containsPrefix(c.Args, tt.wantAgentFlagSome) {
					t.Errorf("%s args %v lack %s", c.Name, c.Args, tt.wantAgentFlagSome)
				}
			}
			wantFlags := []string{"--listen-client-urls=" + tt.client + "://", "--advertise-client-urls=" + tt.client + "://",
				"--listen-peer-urls=" + tt.peer + "://", "--initial-advertise-peer-urls=" + tt.peer + "://"}
			for _, f := range wantFlags {
				if !containsPrefix(spec.InitContainers[0].Args, f) {
					t.Errorf("member-init lacks %s…: %v", f, spec.InitContainers[0].Args)
				}
			}
			if !containsPrefix(spec.Containers[1].Args, "--endpoint="+tt.client+"://") {
				t.Errorf("member-agent endpoint not %s: %v", tt.client, spec.Containers[1].Args)
			}
			env := EtcdEnvironment(e)
			for _, k := range tt.wantEnvTLS {
				if env[k] == "" {
					t.Errorf("%s missing", k)
				}
			}
			for _, k := range tt.wantNoEnvTLS {
				if _, ok := env[k]; ok {
					t.Errorf("%s set without its TLS: %s", k, env[k])
				}
			}
			for _, peer := range strings.Split(env[EnvInitialCluster], ",") {
				if _, url, _ := strings.Cut(peer, "="); !strings.HasPrefix(url, tt.peer+"://") {
					t.Errorf("initial cluster entry %s is not %s", peer, tt.peer)
				}
			}
			running, ok := RunningTransport(sts)
			if !ok || running != TransportOf(e) {
				t.Errorf("RunningTransport = %+v, %v; the spec asks %+v", running, ok, TransportOf(e))
			}
		})
	}
}

func containsPrefix(args []string, prefix string) bool {
	return slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, prefix) })
}

// TestTransportRequired: requireTLS refuses what would run on plain HTTP.
func TestTransportRequired(t *testing.T) {
	plain := testEtcd(3)
	plain.Spec.Etcd.ClientUrlTLS, plain.Spec.Etcd.PeerUrlTLS = nil, nil
	if p := ValidateTransport(plain, false); len(p) != 0 {
		t.Errorf("plain refused without requireTLS: %v", p)
	}
	if p := ValidateTransport(plain, true); len(p) != 2 || p[0].Code != ErrMissingTLS || !strings.Contains(p[0].Message, "spec.etcd.clientUrlTls") || !strings.Contains(p[1].Message, "spec.etcd.peerUrlTls") {
		t.Errorf("plain with requireTLS: %v", p)
	}
	if p := ValidateTransport(testEtcd(3), true); len(p) != 0 {
		t.Errorf("TLS refused with requireTLS: %v", p)
	}
}

// TestAddingTLS: the template that moves running members towards TLS (internal/decide/transport's
// adding stage) gives every member the TLS material as flags of its own (the shared ConfigMap
// stays plain), serves clients on http and https on one port, keeps peers and the sidecars on
// http, and reads back as adding; at TLS the settings move to the ConfigMap and everything is
// https.
func TestAddingTLS(t *testing.T) {
	e := testEtcd(3)
	adding := transport.Stages{Client: transport.Adding, Peer: transport.Adding}
	sts, err := StatefulSet(e, Settings{MemberAgentImage: "img", Transport: &adding})
	if err != nil {
		t.Fatal(err)
	}
	spec := sts.Spec.Template.Spec
	initArgs := spec.InitContainers[0].Args
	for _, want := range []string{
		"--listen-client-urls=http://$(POD_IP):2379,https://$(POD_IP):2379",
		"--advertise-client-urls=http://",
		"--listen-peer-urls=http://$(POD_IP):2380",
		"--initial-advertise-peer-urls=http://",
		"--cert-file=", "--key-file=", "--trusted-ca-file=", "--client-cert-auth=true",
		"--peer-cert-file=", "--peer-key-file=", "--peer-trusted-ca-file=", "--peer-client-cert-auth=true", "--peer-skip-client-san-verification=true",
		"--plaintext",
	} {
		if !containsPrefix(initArgs, want) {
			t.Errorf("member-init lacks %s: %v", want, initArgs)
		}
	}
	if !containsPrefix(spec.Containers[1].Args, "--plaintext") || !containsPrefix(spec.Containers[1].Args, "--endpoint=http://") {
		t.Errorf("member-agent does not stay on http: %v", spec.Containers[1].Args)
	}
	if len(spec.Volumes) != 2+5 {
		t.Errorf("%d volumes, want the token, config and the 5 TLS Secrets", len(spec.Volumes))
	}
	env := ConfigMap(e, adding).Data
	for _, k := range []string{"ETCD_CERT_FILE", "ETCD_PEER_CERT_FILE", "ETCD_CLIENT_CERT_AUTH"} {
		if _, ok := env[k]; ok {
			t.Errorf("the shared ConfigMap has %s while adding", k)
		}
	}
	if !strings.Contains(env[EnvInitialCluster], "=http://") {
		t.Errorf("initial cluster %s, want http peers while adding", env[EnvInitialCluster])
	}
	if got, ok := RunningTransport(sts); !ok || got != adding {
		t.Errorf("RunningTransport = %v %v, want %v", got, ok, adding)
	}

	tls := TransportOf(e)
	final, err := StatefulSet(e, Settings{MemberAgentImage: "img", Transport: &tls})
	if err != nil {
		t.Fatal(err)
	}
	if containsPrefix(final.Spec.Template.Spec.InitContainers[0].Args, "--cert-file=/") && !containsPrefix(final.Spec.Template.Spec.InitContainers[0].Args, "--ca-file=") {
		t.Errorf("TLS template carries the adding flags: %v", final.Spec.Template.Spec.InitContainers[0].Args)
	}
	if env := ConfigMap(e, tls).Data; env["ETCD_CERT_FILE"] == "" || env["ETCD_PEER_CERT_FILE"] == "" {
		t.Errorf("TLS settings missing from the ConfigMap at TLS: %v", env)
	}
	if got, _ := RunningTransport(final); got != tls {
		t.Errorf("RunningTransport of the TLS template = %v", got)
	}
}
