package main

import configv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/config/v1alpha1"

// setConcurrency sets how many participating members the OnDelete controller may replace at
// once; the controller caps it by the quorum's headroom.
func setConcurrency(n int) func(*configv1alpha1.OnDeleteControllerConfiguration) {
	return func(c *configv1alpha1.OnDeleteControllerConfiguration) { c.MaxConcurrentMemberUpdates = n }
}
