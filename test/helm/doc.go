// Package helm tests the charts/etcd-conductor Helm chart with the real helm binary: lint, values
// schema rejections, golden renders, and that the rendered configuration is one the manager's
// strict decoder accepts. The package holds tests only.
package helm
