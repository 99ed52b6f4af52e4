package resources

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
)

// Problem is something wrong with an Etcd's input, with a stable code for status.lastErrors.
type Problem struct {
	Code    string
	Message string
}

func (p Problem) Error() string { return p.Code + ": " + p.Message }

const (
	ErrInvalidReplicas = "ERR_INVALID_REPLICAS"
	// ErrMissingTLS: a TLS setting is incomplete, or absent while the operator requires TLS.
	ErrMissingTLS = "ERR_MISSING_TLS"
	// ErrTransportChange: TLS removed from the members of a running cluster (internal/decide/transport).
	ErrTransportChange = "ERR_TLS_CHANGE"
	// ErrVersionChange: an etcd version change etcd cannot make (internal/decide/versionchange), such as
	// a downgrade by more than one minor version.
	ErrVersionChange = "ERR_VERSION_CHANGE"
	// ErrVolumeChange: a storage class or capacity change that cannot be carried out
	// (internal/decide/volumechange), such as on fewer than three members.
	ErrVolumeChange    = "ERR_VOLUME_CHANGE"
	ErrSecretNamespace = "ERR_SECRET_NAMESPACE"
	ErrSecretMissing   = "ERR_SECRET_MISSING"
	ErrSecretData      = "ERR_SECRET_DATA"
	// ErrForeignObject: an object under one of the Etcd's names exists and is not controlled by
	// it; the operator never adopts it.
	ErrForeignObject = "ERR_FOREIGN_OBJECT"
)

// SecretKeys is a Secret the members mount and the keys it must hold.
type SecretKeys struct {
	Name  string
	Field string // where in the spec it is named, for messages
	Keys  []string
}

// ValidateSpec checks what the CRD schema cannot (or what slipped past it, such as an even
// replica count written before the validation existed). It does no I/O.
func ValidateSpec(e *druidv1alpha1.Etcd) []Problem {
	var problems []Problem
	if p := ValidateReplicas(e.Spec.Replicas); p != nil {
		problems = append(problems, *p)
	}
	problems = append(problems, validateSettings(e)...)
	problems = append(problems, validateDruidRefused(e)...)
	problems = append(problems, validateAdditionalPeerURLs(e)...)
	for _, ref := range secretRefs(e) {
		if ref.name == "" {
			problems = append(problems, Problem{ErrMissingTLS, ref.field + ".name is required"})
			continue
		}
		if ref.namespace != "" && ref.namespace != e.Namespace {
			problems = append(problems, Problem{ErrSecretNamespace, fmt.Sprintf(
				"%s.namespace is %q: pods can only mount Secrets of their own namespace %q", ref.field, ref.namespace, e.Namespace)})
		}
	}
	return problems
}

// ValidateTransport refuses an Etcd without TLS when the operator requires it (its requireTLS
// setting); otherwise plain HTTP is what the Etcd asks for and runs.
func ValidateTransport(e *druidv1alpha1.Etcd, requireTLS bool) []Problem {
	if !requireTLS {
		return nil
	}
	var problems []Problem
	for _, kind := range PlaintextKinds(TransportOf(e)) {
		field := map[string]string{"client": "spec.etcd.clientUrlTls", "peer": "spec.etcd.peerUrlTls"}[kind]
		problems = append(problems, Problem{ErrMissingTLS, fmt.Sprintf(
			"%s is required: the operator is configured with requireTLS, so %s traffic may not be plain HTTP", field, kind)})
	}
	return problems
}

// ValidateReplicas checks a replica count against the API's rules: 0 or odd, at most
// MaxReplicas. Everything sized by replicas (member names, Leases, the Role, the initial cluster)
// is built only after it passed, so a count like 2147483647 is an error, not an allocation.
func ValidateReplicas(r int32) *Problem {
	if r < 0 || (r != 0 && r%2 == 0) || r > druidv1alpha1.MaxReplicas {
		return &Problem{ErrInvalidReplicas, fmt.Sprintf(
			"spec.replicas is %d: it must be 0 or an odd number up to %d (1, 3, 5, 7, 9)", r, druidv1alpha1.MaxReplicas)}
	}
	return nil
}

type secretRef struct {
	field, name, namespace string
	keys                   []string
}

func secretRefs(e *druidv1alpha1.Etcd) []secretRef {
	var refs []secretRef
	add := func(prefix string, t *druidv1alpha1.TLSConfig, withClient bool) {
		if t == nil {
			return
		}
		refs = append(refs,
			secretRef{prefix + ".tlsCASecretRef", t.TLSCASecretRef.Name, t.TLSCASecretRef.Namespace, []string{CADataKey(t.TLSCASecretRef)}},
			secretRef{prefix + ".serverTLSSecretRef", t.ServerTLSSecretRef.Name, t.ServerTLSSecretRef.Namespace, []string{"tls.crt", "tls.key"}},
		)
		if withClient {
			refs = append(refs, secretRef{prefix + ".clientTLSSecretRef", t.ClientTLSSecretRef.Name, t.ClientTLSSecretRef.Namespace, []string{"tls.crt", "tls.key"}})
		}
	}
	// The member-agent needs the client key pair, so it is required for client TLS.
	add("spec.etcd.clientUrlTls", e.Spec.Etcd.ClientUrlTLS, true)
	add("spec.etcd.peerUrlTls", e.Spec.Etcd.PeerUrlTLS.TLS(), false)
	return refs
}

// RequiredSecrets lists the Secrets the member pods mount, with the keys each must hold.
func RequiredSecrets(e *druidv1alpha1.Etcd) []SecretKeys {
	var out []SecretKeys
	for _, ref := range secretRefs(e) {
		if ref.name != "" {
			out = append(out, SecretKeys{Name: ref.name, Field: ref.field, Keys: ref.keys})
		}
	}
	return out
}

// ValidateSecret checks that a fetched Secret (nil when not found) holds the keys the pods mount.
func ValidateSecret(namespace string, want SecretKeys, secret *corev1.Secret) []Problem {
	key := types.NamespacedName{Namespace: namespace, Name: want.Name}
	if secret == nil {
		return []Problem{{ErrSecretMissing, fmt.Sprintf("Secret %s named in %s does not exist", key, want.Field)}}
	}
	var problems []Problem
	for _, k := range want.Keys {
		if len(secret.Data[k]) == 0 {
			problems = append(problems, Problem{ErrSecretData, fmt.Sprintf("Secret %s named in %s has no data key %q", key, want.Field, k)})
		}
	}
	return problems
}
