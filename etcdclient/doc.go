// Package etcdclient talks to the members of etcd clusters over mutual TLS: it asks each member
// for its status, lists the membership and moves leadership. It keeps one long-lived gRPC
// connection per member, so a steady-state reconcile performs no TLS handshake.
package etcdclient
