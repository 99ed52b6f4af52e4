// Package resources builds the desired state of every object an Etcd owns: pure functions from the
// Etcd (and the operator's settings) to API objects. The Etcd reconciler applies them; the other
// controllers, the plan command and the tests read the same names.
//
// The objects: the member StatefulSet and its pod template (statefulset.go, with the member init
// step's restore flags in restore.go and the containers' memory in memory.go), the peer and client
// Services, the ConfigMap, the member and snapshot Leases, the PodDisruptionBudget
// (DisruptionBudget, pure, rules pdb/*), the member-agent's ServiceAccount and RBAC (objects.go,
// backup.go), the member NetworkPolicy (networkpolicy.go) and the member TLS Secret's layout and
// mounts (trust.go). Names are in names.go: the objects', the pods', and the etcd member and Lease
// names of pods (MemberNameOf, PodOfMember, etcd-druid's memberNamePrefix), the one way between a
// pod and its member. A member's peer URLs are in peerurls.go, the transport stage a template
// renders in transport.go, the downgrade record on the StatefulSet in downgrade.go, and the
// validation of a spec and the Secrets it names in validate.go.
//
// etcd-druid's settings go into the configuration in druid_settings.go; the settings refused
// (etcd-wrapper images) are in druid_refused.go, and the members held back for an Etcd that joins
// an existing cluster in druid_existing_cluster.go. applied.go says whether an existing object
// already holds what is desired (server defaults aside), protection.go is the protection mark the
// chart's admission policy reads (MarkProtection), and storeconfig.go turns an etcd-druid StoreSpec
// and its Secret's data into a backupstore.Config (StoreConfig), for the stores the manager opens
// itself.
package resources
