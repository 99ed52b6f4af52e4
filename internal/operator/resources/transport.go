package resources

import (
	"strings"

	appsv1 "k8s.io/api/apps/v1"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/transport"
)

// TransportOf is where the Etcd's spec asks client and peer traffic to be: TLS when it names the
// Secrets (clientUrlTls, peerUrlTls), plain HTTP otherwise, as etcd-druid runs an Etcd without
// them. Running members may be on the way there (internal/decide/transport).
func TransportOf(e *druidv1alpha1.Etcd) transport.Stages {
	return transport.Final(e.Spec.Etcd.ClientUrlTLS != nil, e.Spec.Etcd.PeerUrlTLS != nil)
}

// PlaintextKinds lists the kinds of traffic ("client", "peer") not yet on TLS only; empty when
// all is.
func PlaintextKinds(s transport.Stages) []string {
	var out []string
	if s.Client != transport.TLS {
		out = append(out, "client")
	}
	if s.Peer != transport.TLS {
		out = append(out, "peer")
	}
	return out
}

// RunningTransport is what the template of sts renders, read from the flags the operator puts
// into its member-init container (etcdFlags); ok is false when they are missing (not ours). A
// pod's own transport is known by its revision: the manager's cache holds no pod spec.
func RunningTransport(sts *appsv1.StatefulSet) (s transport.Stages, ok bool) {
	if sts == nil {
		return transport.Stages{}, false
	}
	for _, c := range sts.Spec.Template.Spec.InitContainers {
		if c.Name != MemberInitContainerName {
			continue
		}
		var client, peer string
		peerMaterial := false
		for _, arg := range c.Args {
			switch {
			case strings.HasPrefix(arg, "--listen-client-urls="):
				client = strings.TrimPrefix(arg, "--listen-client-urls=")
			case strings.HasPrefix(arg, "--listen-peer-urls="):
				peer = strings.TrimPrefix(arg, "--listen-peer-urls=")
			case strings.HasPrefix(arg, "--peer-cert-file="):
				peerMaterial = true
			}
		}
		if client == "" || peer == "" {
			return transport.Stages{}, false
		}
		https, http := strings.Contains(client, "https://"), strings.Contains(client, "http://")
		switch {
		case https && http:
			s.Client = transport.Adding
		case https:
			s.Client = transport.TLS
		default:
			s.Client = transport.Plain
		}
		switch {
		case strings.HasPrefix(peer, "https://"):
			s.Peer = transport.TLS
		case peerMaterial:
			s.Peer = transport.Adding
		default:
			s.Peer = transport.Plain
		}
		return s, true
	}
	return transport.Stages{}, false
}

// The URL schemes of a stage: a member at adding serves clients on both.
func listenSchemes(s transport.Stage) []string {
	switch s {
	case transport.TLS:
		return []string{"https"}
	case transport.Adding:
		return []string{"http", "https"}
	}
	return []string{"http"}
}

// advertiseScheme is the scheme a member tells others to dial: https only once every member
// serves it.
func advertiseScheme(s transport.Stage) string {
	if s == transport.TLS {
		return "https"
	}
	return "http"
}

// materialMounted: the stage needs the TLS Secrets mounted.
func materialMounted(s transport.Stage) bool { return s != transport.Plain }

// PeerScheme is the scheme of the peer URLs members of a template at s are dialled at.
func PeerScheme(s transport.Stages) string { return advertiseScheme(s.Peer) }
