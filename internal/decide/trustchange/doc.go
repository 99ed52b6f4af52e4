// Package trustchange decides the TLS material an Etcd's members mount when the user changes the
// certificates or the CA in the Secrets the Etcd names, so that no member ever distrusts another.
//
// etcd re-reads its own certificate and key at every handshake, but the CA bundles it trusts only
// at start. Mounting the user's Secrets as they are would split a cluster on a CA change: a member
// restarted on the new CA alone refuses the others' certificates of the old one, and a certificate
// of the new CA, served at once by every member through the kubelet's refresh, is refused by every
// member not restarted yet. So the members mount an operator-owned copy (the held material) that
// moves in an order where every certificate served is trusted by every member:
//
//  1. a CA the user added is added to the held bundles at once (trust only grows): the members
//     restart to load it, one at a time in the rollout's quorum-safe order;
//  2. a renewed certificate is copied only once every member runs the held bundles and they verify
//     it; one they do not verify is held back (the user's Secrets disagree with themselves);
//  3. a CA the user removed leaves the held bundles only when every held certificate is verified by
//     the user's CAs alone and the copied ones have reached the pods (the kubelet refreshes Secret
//     volumes a minute or so after a change): the members restart again and trust the remaining CAs
//     only.
//
// A user who writes a new CA and its certificates in one step therefore gets: old+new trusted (a
// rolling restart), the new certificates served (no restart), the old CA dropped (a rolling
// restart). A bundle the user builds by hand (old+new, then new certificates, then new alone) takes
// the same path. A cert-manager CA renewal (new CA, certificates renewed weeks later) keeps the old
// CA trusted until the last certificate of it is renewed.
//
// A renewed certificate is copied only when it is fit too (fitness.go): its key is its own, it is
// valid now, it covers the names the members are reached by, it allows the key usages its traffic
// needs. One that is not is held back with a Warning: the kubelet would put it into every pod's
// files at once, and every new handshake on every member would fail together.
//
// Plan returns the held material, which the Etcd reconciler (internal/operator/controller/etcd,
// trust.go) writes into the operator's member TLS Secret. Pure: Plan is a function of what it is
// given, one named rule per answer; the time a certificate is judged at is observed (Observed.Now),
// never read from a clock. Its properties are tested on a simulated three-member cluster, unfit
// writes included. The user's side is docs/tls.md, "Renewals and rotation".
package trustchange
