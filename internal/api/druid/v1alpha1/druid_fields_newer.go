package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// This file declares the types of the fields etcd-druid added in v0.35 to v0.38, with etcd-druid's
// JSON names and bounds, so that its current manifests apply under strict field validation. What
// each one does here is in internal/decide/compat (accepted and ignored), internal/operator/resources (acted on
// or refused) and docs/druid-compatibility.md.

// BboltFreelistType is the freelist type of etcd's bbolt backend.
// +kubebuilder:validation:Enum=array;map
type BboltFreelistType string

const (
	// BboltFreelistArray keeps free pages in a sorted array: smaller databases for small clusters.
	BboltFreelistArray BboltFreelistType = "array"
	// BboltFreelistMap keeps free pages in a hash map (etcd's default): faster on large databases.
	BboltFreelistMap BboltFreelistType = "map"
)

// PeerTLSConfig is TLSConfig plus the settings that exist only for peer traffic. The fields of
// TLSConfig are inlined, so a peerUrlTls written before the peer-only fields existed is unchanged.
type PeerTLSConfig struct {
	TLSConfig `json:",inline"`

	// SkipClientSANVerification turns off the check of a peer's client certificate SANs against
	// its address (etcd's peer-transport-security skip-client-san-verification); the CA check
	// still applies. Unset: skipped, as it always was here (the documented peer certificates
	// carry wildcard names, which cannot match a pod IP); etcd-druid's default is to check.
	// +optional
	SkipClientSANVerification *bool `json:"skipClientSANVerification,omitempty"`
}

// MemberPeerURLs are extra peer URLs of one member (etcd-druid's additionalAdvertisePeerURLs).
type MemberPeerURLs struct {
	// MemberName is the etcd member name: <etcd-name>-<ordinal>, or
	// <prefix>-<etcd-name>-<ordinal> with spec.memberNamePrefix.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?-[0-9]+$`
	MemberName string `json:"memberName"`
	// URLs are the member's extra peer URLs.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=5
	// +kubebuilder:validation:items:MaxLength=2048
	// +listType=set
	URLs []string `json:"urls"`
}

// BootstrapWithExistingCluster names the source cluster etcd-druid joins a new Etcd to.
type BootstrapWithExistingCluster struct {
	// Members are the source cluster's members.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=10
	// +listType=atomic
	Members []BootstrapExistingMember `json:"members"`
	// ClientEndpoints are the source cluster's client URLs.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=10
	// +kubebuilder:validation:items:MaxLength=2048
	// +listType=set
	ClientEndpoints []string `json:"clientEndpoints"`
}

// BootstrapExistingMember is one member of the source cluster.
type BootstrapExistingMember struct {
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=5
	// +kubebuilder:validation:items:MaxLength=2048
	// +listType=set
	PeerURLs []string `json:"peerUrls"`
}

// BootstrapWithExistingClusterStatus is etcd-druid's record of the source cluster an Etcd
// joined. The operator never writes it; it is declared so that copied status is accepted.
type BootstrapWithExistingClusterStatus struct {
	JoinedAt metav1.Time `json:"joinedAt"`
	// +listType=atomic
	Members []BootstrapJoinedMember `json:"members"`
}

// BootstrapJoinedMember is one source member in BootstrapWithExistingClusterStatus.
type BootstrapJoinedMember struct {
	Name string `json:"name"`
	// +listType=atomic
	PeerURLs []string `json:"peerUrls"`
}

// TLS is the Secrets part of a peer TLS configuration, nil when p is: code that mounts and checks
// Secrets treats client and peer TLS alike.
func (p *PeerTLSConfig) TLS() *TLSConfig {
	if p == nil {
		return nil
	}
	return &p.TLSConfig
}
