// Package v1alpha1 holds OperatorConfiguration (config.druid.gardener.cloud/v1alpha1): the
// manager's configuration file, decoded strictly so a typo is a start-up error, not a silent default.
package v1alpha1
