package resources

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
)

// certificate is the part of a cert-manager Certificate the recipe sets and the test reads.
type certificate struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		SecretName string   `json:"secretName"`
		IsCA       bool     `json:"isCA"`
		DNSNames   []string `json:"dnsNames"`
		Usages     []string `json:"usages"`
	} `json:"spec"`
}

// certManagerKeys are the data keys cert-manager writes into a Certificate's Secret.
var certManagerKeys = []string{"tls.crt", "tls.key", "ca.crt"}

// coversName: a DNS name of a certificate (possibly *.domain, one label) covers host.
func coversName(pattern, host string) bool {
	if rest, ok := strings.CutPrefix(pattern, "*."); ok {
		label, domain, found := strings.Cut(host, ".")
		return found && label != "" && domain == rest
	}
	return pattern == host
}

func covered(c certificate, host string) bool {
	return slices.ContainsFunc(c.Spec.DNSNames, func(p string) bool { return coversName(p, host) })
}

// TestCertManagerRecipe: docs/tls.md's cert-manager objects yield every Secret its Etcd names, with
// the keys the member pods mount; the server and peer certificates cover every member's name as
// the operator and the member-agent verify it (and the client Service), the peer one serves and
// dials, the client one is a client certificate, and the CA is a CA.
func TestCertManagerRecipe(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "tls.md"))
	if err != nil {
		t.Fatal(err)
	}
	certs := map[string]certificate{}
	var etcd *druidv1alpha1.Etcd
	for _, block := range regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllSubmatch(raw, -1) {
		for _, doc := range bytes.Split(block[1], []byte("\n---\n")) {
			var kind struct {
				Kind string `json:"kind"`
			}
			if err := yaml.Unmarshal(doc, &kind); err != nil {
				t.Fatalf("docs/tls.md: %v", err)
			}
			switch kind.Kind {
			case "Certificate":
				var c certificate
				if err := yaml.Unmarshal(doc, &c); err != nil {
					t.Fatal(err)
				}
				certs[c.Spec.SecretName] = c
			case "Etcd":
				etcd = &druidv1alpha1.Etcd{}
				if err := yaml.UnmarshalStrict(doc, etcd); err != nil {
					t.Fatalf("docs/tls.md's Etcd: %v", err)
				}
			}
		}
	}
	if etcd == nil || len(certs) == 0 {
		t.Fatalf("docs/tls.md holds no Etcd (%v) or no Certificate (%d)", etcd != nil, len(certs))
	}
	for _, want := range RequiredSecrets(etcd) {
		t.Run(want.Field, func(t *testing.T) {
			if _, ok := certs[want.Name]; !ok {
				t.Fatalf("no Certificate writes Secret %s", want.Name)
			}
			for _, k := range want.Keys {
				if !slices.Contains(certManagerKeys, k) {
					t.Errorf("the pods mount key %q of %s, which cert-manager does not write", k, want.Name)
				}
			}
		})
	}
	tlsCfg, peer := etcd.Spec.Etcd.ClientUrlTLS, etcd.Spec.Etcd.PeerUrlTLS
	if tlsCfg == nil || peer == nil {
		t.Fatal("docs/tls.md's Etcd sets no client or peer TLS")
	}
	server, peerCert, client, ca := certs[tlsCfg.ServerTLSSecretRef.Name], certs[peer.ServerTLSSecretRef.Name],
		certs[tlsCfg.ClientTLSSecretRef.Name], certs[tlsCfg.TLSCASecretRef.Name]
	for i := range int(etcd.Spec.Replicas) + 2 { // members added by a scale-out too
		member := MemberDNSName(etcd.Name, etcd.Namespace, fmt.Sprintf("%s-%d", etcd.Name, i))
		if !covered(server, member) {
			t.Errorf("the server certificate does not cover %s, which the operator verifies", member)
		}
		if !covered(peerCert, member) {
			t.Errorf("the peer certificate does not cover %s", member)
		}
	}
	if svc := fmt.Sprintf("%s.%s.svc", ClientServiceName(etcd), etcd.Namespace); !covered(server, svc) {
		t.Errorf("the server certificate does not cover the client Service %s", svc)
	}
	for _, tc := range []struct {
		name  string
		cert  certificate
		usage string
	}{
		{"server", server, "server auth"}, {"peer serves", peerCert, "server auth"}, {"peer dials", peerCert, "client auth"}, {"client", client, "client auth"},
	} {
		if !slices.Contains(tc.cert.Spec.Usages, tc.usage) {
			t.Errorf("%s certificate %s lacks usage %q", tc.name, tc.cert.Metadata.Name, tc.usage)
		}
	}
	if !ca.Spec.IsCA {
		t.Errorf("the CA Secret %s is not written by a CA Certificate", tlsCfg.TLSCASecretRef.Name)
	}
}
