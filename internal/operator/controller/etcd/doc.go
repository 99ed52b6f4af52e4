// Package etcd holds the Etcd reconciler: it writes the desired state of every object an Etcd owns
// and relies on each object's own controller to act on it. It never touches pods: under
// RollingUpdate the StatefulSet controller replaces them, under OnDelete the ondelete controller.
package etcd
