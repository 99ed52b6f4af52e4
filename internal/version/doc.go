// Package version says which build of etcd-conductor runs: the release (the Helm chart's
// appVersion, which names the image the chart installs) and the commit the binary was built
// from, as Go records it.
package version
