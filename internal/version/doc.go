// Package version says which build of etcd-conductor runs: the release (Version, the Helm chart's
// appVersion, which names the image the chart installs; a test holds the two together) and the
// build (Current: the commit `make build` stamps with -ldflags -X, else what Go recorded, and
// whether the checkout was modified), for `etcd-conductor version` and the manager's start-up log.
package version
