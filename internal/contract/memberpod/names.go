package memberpod

const (
	// EtcdContainerName is the etcd container of a member pod.
	EtcdContainerName = "etcd"
	// MemberAgentContainerName is the sidecar that renews the member Lease.
	MemberAgentContainerName = "member-agent"
	// MemberInitContainerName decides how the member starts and writes its etcd configuration.
	MemberInitContainerName = "member-init"
)
