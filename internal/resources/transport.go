package resources

import (
	"strings"

	appsv1 "k8s.io/api/apps/v1"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
)

// Transport is how the members of an Etcd talk: to clients (the operator, the member-agents,
// the applications) and to each other. Each is TLS when the Etcd names its Secrets, plain HTTP
// otherwise, as etcd-druid runs an Etcd without clientUrlTls or peerUrlTls.
type Transport struct {
	ClientTLS bool
	PeerTLS   bool
}

// TransportOf is the transport the Etcd's spec asks for.
func TransportOf(e *druidv1alpha1.Etcd) Transport {
	return Transport{ClientTLS: e.Spec.Etcd.ClientUrlTLS != nil, PeerTLS: e.Spec.Etcd.PeerUrlTLS != nil}
}

// ClientScheme is the scheme of the members' client URLs.
func (t Transport) ClientScheme() string { return scheme(t.ClientTLS) }

// PeerScheme is the scheme of the members' peer URLs.
func (t Transport) PeerScheme() string { return scheme(t.PeerTLS) }

// Plaintext lists the unencrypted kinds of traffic ("client", "peer"); empty when all is TLS.
func (t Transport) Plaintext() []string {
	var out []string
	if !t.ClientTLS {
		out = append(out, "client")
	}
	if !t.PeerTLS {
		out = append(out, "peer")
	}
	return out
}

func scheme(tls bool) string {
	if tls {
		return "https"
	}
	return "http"
}

// RunningTransport is the transport the members of sts were created with, read from the flags
// the operator renders into its member-init container (etcdFlags); ok is false when the
// StatefulSet carries none of them (not one of ours).
func RunningTransport(sts *appsv1.StatefulSet) (t Transport, ok bool) {
	if sts == nil {
		return Transport{}, false
	}
	var client, peer bool
	for _, c := range sts.Spec.Template.Spec.InitContainers {
		if c.Name != MemberInitContainerName {
			continue
		}
		for _, arg := range c.Args {
			switch {
			case strings.HasPrefix(arg, "--listen-client-urls="):
				client, t.ClientTLS = true, strings.HasPrefix(strings.TrimPrefix(arg, "--listen-client-urls="), "https://")
			case strings.HasPrefix(arg, "--listen-peer-urls="):
				peer, t.PeerTLS = true, strings.HasPrefix(strings.TrimPrefix(arg, "--listen-peer-urls="), "https://")
			}
		}
	}
	return t, client && peer
}
