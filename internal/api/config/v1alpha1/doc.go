// Package v1alpha1 holds OperatorConfiguration (config.druid.gardener.cloud/v1alpha1): the
// manager's configuration file, decoded strictly (Decode) so a typo is a start-up error, not a
// silent default.
//
// Every key of etcd-druid's OperatorConfiguration is known, so a file written for etcd-druid
// decodes (druid_types.go); the etcd-druid keys etcd-conductor acts on under its own names are
// taken over in druid_honoured.go, etcd-druid's feature gates are set apart from etcd-conductor's
// in druid_gates.go, and Ignored (ignored.go) lists the etcd-druid keys a file sets that are not
// acted on, with why (docs/druid-compatibility.md, "OperatorConfiguration"). Feature gate names are
// checked by internal/features, which owns the list of gates.
package v1alpha1
