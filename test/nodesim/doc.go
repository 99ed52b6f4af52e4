// Package nodesim plays the kubelet of one Node for tests: there is no
// kubelet or container runtime on our test machines, and everything else in
// the stack (kube-apiserver, kube-controller-manager, etcd members, the
// operator) is real. The simulator watches pods bound to its Node and runs
// each container as a real host process, reporting status through the API
// the way kubelet does, so controllers see the same pod lifecycle they would
// see in a cluster. It needs root.
//
// # Network
//
// SetupNetwork creates a host bridge (e.g. "ecsim0") with gateway
// 10.213.<index>.1/24; NetworkForTest picks a free index so parallel test
// binaries never share a bridge or subnet. Each pod gets its own network
// namespace with a veth pair to the bridge and an IP from the subnet
// (round-robin, like CNI host-local), reported in status.podIP/podIPs.
// Host processes reach pods over the bridge; pods reach the host (and
// kube-apiserver, which must bind to GatewayIP) through the gateway. Create
// the network before the control plane.
//
// # Containers
//
// A container is `nsenter --net=<pod netns> unshare --mount --uts sh -c
// '<bind mounts>; hostname <pod>; exec "$0" "$@"' <binary> <args>`: it shares
// the pod's network namespace with its siblings and has private mount and UTS
// namespaces. The root filesystem is the host's (there are no image layers):
// volume mount points are created on the host as empty directories, and only
// volumes and /etc/hosts are private to the pod. Processes run in their own
// process group with Pdeathsig, from one locked OS thread, so they die with
// the simulator; as root unless the securityContext names a user (below). stdout and stderr are appended to one log file per
// container (Logs).
//
// Images map to host binaries. Built in: a repository whose last path element
// is "etcd" with tag v3.6.8, 3.6.8 or 3.6.8-0 (any version with
// <BinDir>/etcd-<version> present) runs <BinDir>/etcd-<version>, with
// etcdctl-/etcdutl-<version> as the image's other tools; a repository ending
// in "etcd-conductor" (any tag) runs <BinDir>/etcd-conductor. Options.Images
// adds mappings. command[0] is the image's path of its binary and is replaced:
// by the tool of the same base name (etcd, etcdctl, etcd-conductor, ...) or
// else by the entrypoint; an empty command runs the entrypoint with args.
// sh/bash commands run the host shell with the image's tools first on PATH.
// An image without mapping is Waiting ErrImagePull, then ImagePullBackOff,
// retried with back-off. "Pulling" hard-links (or copies) the image's
// binaries into a world-readable directory under the system temp dir, so a
// non-root container can exec them wherever the host keeps them.
//
// Options.OCIImages maps references to OCI archives or layouts (make image's
// bin/etcd-conductor-image.tar): such an image runs as a container runtime
// runs it (ociimage.go). Its layers for the host platform are unpacked once
// into a root filesystem (whiteouts applied; device nodes, entries through
// symlinks or outside the root refused); command replaces its Entrypoint and
// args its Cmd; the executable is found inside that root (a path, or a name on
// PATH), and one that is not there fails the start as runc does: terminated
// StartError, exit code 128, then CrashLoopBackOff. Its USER applies unless
// runAsUser is set, its Env lies under the container's, its WorkingDir applies
// unless the container sets one. The process is started from the root's path
// but not chrooted: it sees the host's filesystem with the pod's mounts.
//
// # Pod-spec features supported
//
//   - containers, initContainers (sequential, must exit 0; no sidecars, i.e.
//     no container-level restartPolicy), restartPolicy Always/OnFailure/Never
//     with kubelet's CrashLoopBackOff (immediate first restart, then base
//     doubling to max, reset after a run of 2×max).
//   - command/args with $(VAR) expansion ($$ escapes); workingDir.
//   - env: value with $(VAR) expansion, fieldRef (metadata.name, namespace,
//     uid, labels, annotations, labels['k'], annotations['k'], spec.nodeName,
//     spec.serviceAccountName, status.podIP(s), status.hostIP(s)),
//     secretKeyRef, configMapKeyRef (optional honoured); envFrom configMapRef
//     and secretRef with prefix. Not resourceFieldRef. Plus PATH, HOSTNAME,
//     HOME (/root, or / for a non-root user) and KUBERNETES_SERVICE_HOST/PORT
//     (and KUBERNETES_PORT_*) when Options.APIServerHost is set; no other
//     service link variables.
//   - volumes: emptyDir, secret and configMap (all keys or items, defaultMode,
//     item mode, optional), downwardAPI (fieldRef items), projected (secret,
//     configMap, downwardAPI, serviceAccountToken via the TokenRequest API
//     bound to the pod, so the admission-injected kube-api-access-* volume
//     works), persistentVolumeClaim (a directory <DataDir>/<ns>/<claim>-<uid>
//     that survives pod deletion but not claim deletion; the pod waits for the
//     claim to exist; the simulator provisions a hostPath PV "pvc-<uid>" and
//     binds the claim, and deletes both PV and data when the claim goes; a
//     bound claim asking for more in a class that allows expansion is grown
//     as the CSI external-resizer and kubelet grow it: PV capacity, then
//     FileSystemResizePending, then status.capacity once a pod mounts it),
//     hostPath. volumeMounts with readOnly, subPath, subPathExpr. Secret,
//     configMap, downwardAPI and projected volumes are refreshed every
//     VolumeSyncPeriod with kubelet's atomic-writer layout (..data symlink
//     swap), so updates reach running containers (not through subPath).
//   - probes: readiness, liveness, startup with httpGet (scheme, host default
//     pod IP, named or numbered port, path, headers; 200–399 succeeds; HTTPS
//     probes fail, since kubelet would not verify them), tcpSocket, grpc, exec (run inside the container's
//     namespaces with its env); initialDelaySeconds, periodSeconds,
//     timeoutSeconds, successThreshold, failureThreshold, and
//     terminationGracePeriodSeconds for liveness/startup kills.
//   - securityContext (pod and container, container first): runAsUser,
//     runAsGroup, supplementalGroups and fsGroup become the process's
//     credentials (setpriv, after the mounts); runAsNonRoot with no non-root
//     user is Waiting CreateContainerConfigError "container has runAsNonRoot
//     and image will run as root" (host-binary images run as root, OCI images
//     as their USER, unless runAsUser says otherwise); allowPrivilegeEscalation false sets no_new_privs;
//     capabilities.drop empties the bounding set (ALL) or drops those named;
//     readOnlyRootFilesystem remounts / read-only in the container's mount
//     namespace (volumes stay writable). fsGroup applies kubelet's
//     SetVolumeOwnership: secret, configMap, downwardAPI and projected files
//     are group fsGroup and group-readable whatever their mode; claims and
//     emptyDirs are re-owned (group rw, setgid directories) when mounted, with
//     fsGroupChangePolicy OnRootMismatch skipping a root that already fits.
//     Exec and exec probes run with the same identity. Not applied: seccomp
//     and AppArmor profiles, SELinux options, capabilities.add, procMount,
//     sysctls, runAsUser from the image.
//   - hostname, subdomain; readinessGates (counted in Ready).
//   - a changed container image in the pod spec restarts that container.
//   - deletion: SIGTERM, deletionGracePeriodSeconds (else
//     terminationGracePeriodSeconds), SIGKILL to the process group, status
//     with terminated containers and terminal phase, sandbox teardown, then
//     delete with grace 0 and a UID precondition. No preStop/postStart hooks.
//
// Events are recorded with source kubelet and kubelet's reasons (Pulled,
// Created, Started, Killing, BackOff, Unhealthy, Failed, FailedMount).
//
// Not served: the kubelet API (kubectl logs/exec/port-forward through the
// apiserver fail; use Logs and Exec). Ignored: resources and QoS enforcement, hostNetwork
// (pods always get their own network namespace), affinity, nodeSelector,
// tolerations and taints, ports' hostPort, terminationMessagePath,
// ephemeral containers, imagePullPolicy (binaries are always "present").
//
// # Status
//
// Container states Waiting{ContainerCreating|PodInitializing|ErrImagePull|
// ImagePullBackOff|CreateContainerConfigError|CrashLoopBackOff} →
// Running{startedAt} → Terminated{exitCode (128+signal when killed), reason
// Completed|Error|StartError}; lastState, restartCount, ready, started,
// image, imageID, containerID. Pod conditions PodReadyToStartContainers,
// Initialized, ContainersReady, Ready (PodScheduled comes from binding);
// phase per kubelet's rules; podIP(s), hostIP(s), startTime. Written with
// UpdateStatus on the status subresource, preserving conditions we do not own.
//
// # DNS
//
// The simulator plays CoreDNS from one table: a pod's
// <hostname>.<subdomain>.<ns>.svc.cluster.local exists while a headless
// Service named <subdomain> selects the pod and the pod is ready or the
// Service publishes not-ready addresses; <service>.<ns>.svc.cluster.local
// lists the ready pods a Service selects, for headless and ClusterIP
// Services alike (no kube-proxy: ClusterIP Services resolve to pod IPs, so
// they only work when port == targetPort). Only this simulator's pods count.
// Pods see the table twice: a UDP DNS server on GatewayIP:53 (A records,
// NODATA for other types, NXDOMAIN otherwise, TTL 5s; no upstream) named in a
// kubelet-style /etc/resolv.conf (ClusterFirst: search <ns>.svc.cluster.local
// svc.cluster.local cluster.local, ndots:5; dnsPolicy Default keeps the
// host's, None/dnsConfig honoured); and each pod's /etc/hosts, bind-mounted
// and rewritten in place (a bind mount pins the inode), with short forms
// listed too. Simulator.Resolve and Simulator.DialContext give host
// processes the same view.
//
// # Node
//
// The simulator registers its Node (Ready, capacity, InternalIP = gateway),
// renews its Lease in kube-node-lease every 10s and reposts node status every
// minute. Unless DisableScheduling is set it also binds unscheduled pods with
// the default scheduler name to its Node through the binding subresource
// (ignoring affinity and resources).
//
// # Faults
//
// Kill (SIGKILL, restarted per policy), Hang/Resume (SIGSTOP/SIGCONT),
// Partition/Heal (iptables DROP on the pod's eth0, both directions, inside
// its namespace), PartitionFrom and DelayFrom (a slow link to some peers: an
// NFQUEUE in the pod's namespace holds their packets for a fixed delay, both
// ways; Heal lifts both), Mute (the pod's listener on a port unreachable from
// outside while what it dials out works: on a peer port, a member that hears
// its peers and is not heard), CrashOnStart (next starts exit 1), plus PodIP, Logs and
// Exec. The same is served over HTTP on Options.ControlAddr (loopback) for
// the `nodesim fault` CLI.
package nodesim
