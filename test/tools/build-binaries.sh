#!/usr/bin/env bash
# Builds the control-plane and etcd binaries the tests run, from the Go module proxy, into a
# version-keyed cache outside the clone, then links them into bin/. A fresh machine builds them
# (about 6 minutes cold); a warm one only links. Usage:
#   build-binaries.sh kubernetes <version>   -> kube-apiserver kube-controller-manager kubectl
#   build-binaries.sh etcd <version>         -> etcd-<version> (and etcdctl-<version>)
#   build-binaries.sh helm <version>         -> helm
#   build-binaries.sh controller-gen <version> -> controller-gen
#   build-binaries.sh versitygw <version>    -> versitygw (an S3 gateway over a directory, for backups)
#   build-binaries.sh promtool <version>     -> promtool (unit tests of the chart's alert rules)
set -euo pipefail

what=$1 version=$2
repo_root=$(cd "$(dirname "$0")/../.." && pwd)
bin_dir=${BIN_DIR:-$repo_root/bin}
cache_root=${TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/etcd-conductor/tools}
cache=$cache_root/$what-$version
mkdir -p "$bin_dir" "$cache"

link_all() {
  for f in "$cache"/bin/*; do ln -sf "$f" "$bin_dir/$(basename "$f")"; done
}

if [ -f "$cache/.done" ]; then link_all; exit 0; fi

work=$cache/module
rm -rf "$work" && mkdir -p "$work" "$cache/bin"
cd "$work"
export GOFLAGS=-mod=mod CGO_ENABLED=0

case $what in
kubernetes)
  go mod init local/k8s-binaries >/dev/null 2>&1
  gomod=$(go mod download -json "k8s.io/kubernetes@v$version" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
  go mod edit -require="k8s.io/kubernetes@v$version"
  # k8s.io/kubernetes replaces each staging module with ./staging/...; point each at its published
  # v0.X.Y instead, which is what makes the module buildable from the proxy.
  staging_version="v0.${version#*.}"
  for m in $(awk '/=> .\/staging\//{print $1}' "$gomod"); do
    go mod edit -replace="$m=$m@$staging_version"
  done
  # No kube-scheduler: the node simulator binds pods itself (it cost ~20 s of a cold build).
  bins="kube-apiserver kube-controller-manager kubectl"
  for b in $bins; do
    pkg=k8s.io/kubernetes/cmd/$b
    [ "$b" = kubectl ] && pkg=k8s.io/kubernetes/cmd/kubectl
    go mod edit -tool="$pkg"
  done
  go mod tidy >/dev/null
  minor=${version#*.}; minor=${minor%%.*}
  ldflags="-s -w"
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags="$ldflags -X $p.gitVersion=v$version -X $p.gitMajor=1 -X $p.gitMinor=$minor"
  done
  for b in $bins; do
    go build -trimpath -tags selinux,notest,grpcnotrace -ldflags "$ldflags" -o "$cache/bin/$b" "k8s.io/kubernetes/cmd/$b"
  done
  ;;
etcd)
  go mod init local/etcd-binaries >/dev/null 2>&1
  for m in server/v3 etcdctl/v3 api/v3 client/pkg/v3 client/v3 pkg/v3; do
    go mod edit -require="go.etcd.io/etcd/$m@v$version"
  done
  printf 'package tools\n\nimport (\n\t_ "go.etcd.io/etcd/server/v3/embed"\n)\n' > tools.go
  go mod tidy >/dev/null
  go build -trimpath -ldflags "-s -w" -o "$cache/bin/etcd-$version" go.etcd.io/etcd/server/v3
  go build -trimpath -ldflags "-s -w" -o "$cache/bin/etcdctl-$version" go.etcd.io/etcd/etcdctl/v3
  ;;
helm)
  GOBIN=$cache/bin go install "helm.sh/helm/v3/cmd/helm@v$version"
  ;;
controller-gen)
  GOBIN=$cache/bin go install "sigs.k8s.io/controller-tools/cmd/controller-gen@v$version"
  ;;
versitygw)
  GOBIN=$cache/bin go install -trimpath -ldflags "-s -w" "github.com/versity/versitygw/cmd/versitygw@v$version"
  ;;
promtool)
  # Prometheus's Go module is tagged v0.X.Y for release 3.X.Y; promtool is all the tests need.
  GOBIN=$cache/bin go install -trimpath -ldflags "-s -w" "github.com/prometheus/prometheus/cmd/promtool@v$version"
  ;;
*) echo "unknown tool set: $what" >&2; exit 2 ;;
esac

rm -rf "$work"
touch "$cache/.done"
link_all
