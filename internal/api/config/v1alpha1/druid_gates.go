package v1alpha1

import (
	"maps"
	"slices"
)

// druidFeatureGates are etcd-druid's feature gates, each with why etcd-conductor ignores it.
// etcd-druid's chart writes featureGates: {UpgradeEtcdVersion: false} by default, so its files
// name them; the features package, which owns etcd-conductor's gates, never sees them. No name
// here may be one of etcd-conductor's gates: it would be dropped before it reached them.
var druidFeatureGates = map[string]string{
	"UseEtcdWrapper":     "an etcd-druid gate (GA there) for its etcd-wrapper image; member pods run the etcd image the Etcd names",
	"UpgradeEtcdVersion": "an etcd-druid gate for its etcd upgrade path; an etcd version change is a spec change, rolled out like any other",
}

// ConductorFeatureGates is featureGates without etcd-druid's gates: the overrides of
// etcd-conductor's own gates, which is what the features package is to check and apply.
func (c *OperatorConfiguration) ConductorFeatureGates() map[string]bool {
	own := make(map[string]bool, len(c.FeatureGates))
	for name, enabled := range c.FeatureGates {
		if _, druid := druidFeatureGates[name]; !druid {
			own[name] = enabled
		}
	}
	return own
}

// ignoredFeatureGates lists the etcd-druid gates the configuration sets, sorted, with why each
// is ignored.
func (c *OperatorConfiguration) ignoredFeatureGates() []ignoredKey {
	var out []ignoredKey
	for _, name := range slices.Sorted(maps.Keys(c.FeatureGates)) {
		if why, druid := druidFeatureGates[name]; druid {
			out = append(out, ignoredKey{path: "featureGates." + name, why: why})
		}
	}
	return out
}
