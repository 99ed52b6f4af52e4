#!/usr/bin/env bash
# packages.sh unit|integration: the Go packages of one test stage of make test.
#   unit:        every package whose tests need no binaries (etcd, kube-apiserver, kubectl, helm):
#                it imports none of the harnesses that start them. Derived, not listed, so a new
#                package is not missed.
#   integration: every other package but the e2e suite.
set -euo pipefail
harnesses='/test/(localcluster|stack|framework|helm|helmcli|e2e)( |$)|/etcdclient/etcdtest( |$)|/test/tools'
unit=$(go list -f '{{.ImportPath}} {{join .Deps " "}} {{join .TestImports " "}} {{join .XTestImports " "}}' ./... |
  grep -v -E "$harnesses" | cut -d' ' -f1)
case "${1:-}" in
unit) echo "$unit" ;;
integration) go list ./... | grep -v '/test/e2e' | grep -v -x -F -f <(echo "$unit") ;;
*) echo "usage: $0 unit|integration" >&2; exit 2 ;;
esac
