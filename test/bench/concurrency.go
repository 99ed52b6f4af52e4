package main

import configv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/config/v1alpha1"

// setConcurrency sets how many participating members the OnDelete controller may replace at once.
// Until the controller has that setting this leaves the configuration as it is, so the strategy
// runs one member at a time and its rows say nothing about concurrency.
func setConcurrency(n int) func(*configv1alpha1.OnDeleteControllerConfiguration) {
	_ = n
	return nil
}
