package resources

import (
	"crypto/sha256"
	"encoding/hex"
	"net/url"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/trustchange"
	conductortls "github.com/etcd-conductor/etcd-conductor/tls"
)

// AnnotationTrustChecksum is, on the pod template, the checksum of the CA bundles the members were
// last restarted for. etcd re-reads its own certificate and key at every handshake, so a renewed
// certificate needs no restart; but it reads the CA bundles it trusts only at start, so a changed
// bundle needs every member restarted, which the annotation turns into a rollout: one member at a
// time, the leader last.
const AnnotationTrustChecksum = "etcd-conductor.io/trust-checksum"

// AnnotationCertificatesCopiedAt is, on the member TLS Secret, when a certificate was last copied
// into it (RFC 3339): a CA leaves the bundles only once the kubelet has had time to put the copies
// into every pod's files (internal/decide/trustchange).
const AnnotationCertificatesCopiedAt = "etcd-conductor.io/certificates-copied-at"

// The member TLS Secret's keys.
const (
	memberTLSClientCA   = "client-ca.crt"
	memberTLSPeerCA     = "peer-ca.crt"
	memberTLSServerCert = "server.crt"
	memberTLSServerKey  = "server.key"
	memberTLSClientCert = "client.crt"
	memberTLSClientKey  = "client.key"
	memberTLSPeerCert   = "peer.crt"
	memberTLSPeerKey    = "peer.key"
)

// MemberTLSSecretName is the operator's own Secret with the TLS material the members mount: the
// Etcd's Secrets are copied into it in an order where no member ever distrusts another
// (internal/decide/trustchange).
func MemberTLSSecretName(e *druidv1alpha1.Etcd) string { return e.Name + "-member-tls" }

// UsesTLS tells whether the Etcd names TLS Secrets for client or peer traffic.
func UsesTLS(e *druidv1alpha1.Etcd) bool {
	return e.Spec.Etcd.ClientUrlTLS != nil || e.Spec.Etcd.PeerUrlTLS.TLS() != nil
}

// UserTLSSecrets are the Secrets the Etcd names, by name, each read once.
func UserTLSSecrets(e *druidv1alpha1.Etcd) []string {
	var names []string
	add := func(name string) {
		for _, n := range names {
			if n == name || name == "" {
				return
			}
		}
		names = append(names, name)
	}
	if c := e.Spec.Etcd.ClientUrlTLS; c != nil {
		add(c.TLSCASecretRef.Name)
		add(c.ServerTLSSecretRef.Name)
		add(c.ClientTLSSecretRef.Name)
	}
	if p := e.Spec.Etcd.PeerUrlTLS.TLS(); p != nil {
		add(p.TLSCASecretRef.Name)
		add(p.ServerTLSSecretRef.Name)
	}
	return names
}

// UserTLSMaterial is the TLS material of the Etcd's Secrets, from secrets by name; a Secret
// missing from it leaves its part empty.
func UserTLSMaterial(e *druidv1alpha1.Etcd, secrets map[string]*corev1.Secret) trustchange.Material {
	var m trustchange.Material
	data := func(name, key string) []byte {
		if s := secrets[name]; s != nil {
			return s.Data[key]
		}
		return nil
	}
	pair := func(name string) trustchange.Pair {
		return trustchange.Pair{Cert: data(name, corev1.TLSCertKey), Key: data(name, corev1.TLSPrivateKeyKey)}
	}
	if c := e.Spec.Etcd.ClientUrlTLS; c != nil {
		m.ClientCA = data(c.TLSCASecretRef.Name, CADataKey(c.TLSCASecretRef))
		m.Server = pair(c.ServerTLSSecretRef.Name)
		if c.ClientTLSSecretRef.Name != "" {
			m.Client = pair(c.ClientTLSSecretRef.Name)
		}
	}
	if p := e.Spec.Etcd.PeerUrlTLS.TLS(); p != nil {
		m.PeerCA = data(p.TLSCASecretRef.Name, CADataKey(p.TLSCASecretRef))
		m.Peer = pair(p.ServerTLSSecretRef.Name)
	}
	return m
}

// MemberTLSMaterial is what the member TLS Secret holds; empty for nil.
func MemberTLSMaterial(s *corev1.Secret) trustchange.Material {
	if s == nil {
		return trustchange.Material{}
	}
	d := s.Data
	return trustchange.Material{
		ClientCA: d[memberTLSClientCA], PeerCA: d[memberTLSPeerCA],
		Server: trustchange.Pair{Cert: d[memberTLSServerCert], Key: d[memberTLSServerKey]},
		Client: trustchange.Pair{Cert: d[memberTLSClientCert], Key: d[memberTLSClientKey]},
		Peer:   trustchange.Pair{Cert: d[memberTLSPeerCert], Key: d[memberTLSPeerKey]},
	}
}

// MemberTLSData is the member TLS Secret's data for m; empty parts are left out.
func MemberTLSData(m trustchange.Material) map[string][]byte {
	out := map[string][]byte{}
	for k, v := range map[string][]byte{
		memberTLSClientCA: m.ClientCA, memberTLSPeerCA: m.PeerCA,
		memberTLSServerCert: m.Server.Cert, memberTLSServerKey: m.Server.Key,
		memberTLSClientCert: m.Client.Cert, memberTLSClientKey: m.Client.Key,
		memberTLSPeerCert: m.Peer.Cert, memberTLSPeerKey: m.Peer.Key,
	} {
		if len(v) > 0 {
			out[k] = v
		}
	}
	return out
}

// MemberClientTLSSecrets is the member TLS Secret as the CA Secret and the client key pair Secret
// the operator dials the members with (tls.FromSecrets' layout): the CA under caKey.
func MemberClientTLSSecrets(s *corev1.Secret) (ca *corev1.Secret, caKey string, pair *corev1.Secret) {
	// Named and versioned as s, so the key pair built from it is kept as long as s is unchanged.
	pair = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: s.Name, ResourceVersion: s.ResourceVersion},
		Data: map[string][]byte{corev1.TLSCertKey: s.Data[memberTLSClientCert], corev1.TLSPrivateKeyKey: s.Data[memberTLSClientKey]}}
	return s, memberTLSClientCA, pair
}

// MountsMemberTLS tells whether the StatefulSet's members mount the member TLS Secret (releases
// before it mounted the Etcd's Secrets).
func MountsMemberTLS(sts *appsv1.StatefulSet, e *druidv1alpha1.Etcd) bool {
	for _, v := range sts.Spec.Template.Spec.Volumes {
		if v.Secret != nil && v.Secret.SecretName == MemberTLSSecretName(e) {
			return true
		}
	}
	return false
}

// TrustChecksum is the checksum of the CA bundles of m, each named by the kind of traffic it
// secures ("client", "peer") so that the same bundle moving from one to the other is a change too.
func TrustChecksum(m trustchange.Material) string {
	h := sha256.New()
	for _, b := range []struct {
		kind   string
		bundle []byte
	}{{"client", m.ClientCA}, {"peer", m.PeerCA}} {
		if len(b.bundle) > 0 {
			h.Write([]byte(b.kind))
			h.Write([]byte{0})
			h.Write(b.bundle)
			h.Write([]byte{0})
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// memberTLSVolume mounts the member TLS Secret's keys under the file names etcd and the
// member-agent are given (conductortls.DefaultCADataKey, tls.crt, tls.key).
func memberTLSVolume(e *druidv1alpha1.Etcd, name string, keys ...string) corev1.Volume {
	paths := map[string]string{
		memberTLSClientCA: conductortls.DefaultCADataKey, memberTLSPeerCA: conductortls.DefaultCADataKey,
		memberTLSServerCert: corev1.TLSCertKey, memberTLSClientCert: corev1.TLSCertKey, memberTLSPeerCert: corev1.TLSCertKey,
		memberTLSServerKey: corev1.TLSPrivateKeyKey, memberTLSClientKey: corev1.TLSPrivateKeyKey, memberTLSPeerKey: corev1.TLSPrivateKeyKey,
	}
	items := make([]corev1.KeyToPath, 0, len(keys))
	for _, k := range keys {
		items = append(items, corev1.KeyToPath{Key: k, Path: paths[k]})
	}
	return secretVolume(name, MemberTLSSecretName(e), items)
}

// CertificateNeed is what the members of e need of their certificates, for members 0..replicas-1
// (the larger of the desired and the running count, so that a scale in flight is covered): the
// serving certificate covers each member's DNS name (the operator and the member-agents verify
// it) and one name of the client Service; the peer certificate every host of each member's peer
// URLs (the members verify it when they dial one another).
func CertificateNeed(e *druidv1alpha1.Etcd, replicas int) trustchange.Need {
	n := min(max(replicas, 0), druidv1alpha1.MaxReplicas)
	var need trustchange.Need
	for i := 0; i < n; i++ {
		pod := PodName(e, i)
		need.ServerNames = append(need.ServerNames, MemberDNSName(e.Name, e.Namespace, pod))
		for _, u := range PeerURLs(e, "https", pod) {
			if parsed, err := url.Parse(u); err == nil && parsed.Hostname() != "" {
				need.PeerNames = append(need.PeerNames, parsed.Hostname())
			}
		}
	}
	svc := ClientServiceName(e)
	need.ServerAnyOf = []string{svc, svc + "." + e.Namespace, svc + "." + e.Namespace + ".svc", svc + "." + e.Namespace + ".svc.cluster.local"}
	return need
}

// CertificateSecrets names the Etcd's Secret each certificate of trustchange.Material comes from.
func CertificateSecrets(e *druidv1alpha1.Etcd) trustchange.SecretNames {
	var s trustchange.SecretNames
	if c := e.Spec.Etcd.ClientUrlTLS; c != nil {
		s.Server, s.Client = c.ServerTLSSecretRef.Name, c.ClientTLSSecretRef.Name
	}
	if p := e.Spec.Etcd.PeerUrlTLS.TLS(); p != nil {
		s.Peer = p.ServerTLSSecretRef.Name
	}
	return s
}
