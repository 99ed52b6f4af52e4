package nodesim

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
)

const clusterDomain = "cluster.local"

// dnsPod is what the DNS stand-in needs to know about one running pod.
type dnsPod struct {
	namespace string
	hostname  string
	subdomain string
	labels    map[string]string
	ip        string
	ready     bool
	hostsFile string // the pod's own /etc/hosts on the host
}

// dns plays CoreDNS through hosts files: each pod's /etc/hosts lists the
// records cluster DNS would serve for the pods of this simulator. A pod's
// `<hostname>.<subdomain>.<ns>.svc.cluster.local` exists only while a headless
// Service named <subdomain> selects it and the pod is ready (or the Service
// publishes not-ready addresses); `<service>.<ns>.svc.cluster.local` lists the
// ready pods a Service selects, for headless and ClusterIP Services alike
// (there is no kube-proxy, so a ClusterIP Service only works when port ==
// targetPort).
type dns struct {
	mu       sync.Mutex
	pods     map[types.UID]dnsPod
	services func() []*corev1.Service
	written  map[string]string // hosts file → last content, to skip no-op writes
}

func newDNS(services func() []*corev1.Service) *dns {
	return &dns{pods: map[types.UID]dnsPod{}, services: services, written: map[string]string{}}
}

func (d *dns) set(uid types.UID, p dnsPod) {
	d.mu.Lock()
	d.pods[uid] = p
	d.mu.Unlock()
}

func (d *dns) remove(uid types.UID) {
	d.mu.Lock()
	if p, ok := d.pods[uid]; ok {
		delete(d.written, p.hostsFile)
	}
	delete(d.pods, uid)
	d.mu.Unlock()
}

// records maps each fully qualified name to its addresses.
func (d *dns) records() map[string][]string {
	d.mu.Lock()
	pods := make([]dnsPod, 0, len(d.pods))
	for _, p := range d.pods {
		pods = append(pods, p)
	}
	d.mu.Unlock()
	sort.Slice(pods, func(i, j int) bool { return pods[i].ip < pods[j].ip })
	recs := map[string][]string{}
	for _, svc := range d.services() {
		if svc.Spec.Type == corev1.ServiceTypeExternalName || len(svc.Spec.Selector) == 0 {
			continue
		}
		sel := labels.SelectorFromSet(svc.Spec.Selector)
		headless := svc.Spec.ClusterIP == corev1.ClusterIPNone
		svcName := fmt.Sprintf("%s.%s.svc.%s", svc.Name, svc.Namespace, clusterDomain)
		for _, p := range pods {
			if p.namespace != svc.Namespace || !sel.Matches(labels.Set(p.labels)) {
				continue
			}
			if !p.ready && !svc.Spec.PublishNotReadyAddresses {
				continue
			}
			recs[svcName] = append(recs[svcName], p.ip)
			if headless && p.subdomain == svc.Name && p.hostname != "" {
				name := fmt.Sprintf("%s.%s", p.hostname, svcName)
				recs[name] = append(recs[name], p.ip)
			}
		}
	}
	return recs
}

// resolve answers a lookup from the host side, accepting the same short
// forms a pod in no particular namespace could use (.svc or fully qualified).
func (d *dns) resolve(name string) []string {
	name = strings.TrimSuffix(name, ".")
	if strings.HasSuffix(name, ".svc") {
		name += "." + clusterDomain
	}
	return d.records()[name]
}

// hostsContent renders the /etc/hosts of pod p, with the names that p's
// resolv.conf search path would make resolvable in short form.
func hostsContent(p dnsPod, recs map[string][]string) string {
	var b strings.Builder
	b.WriteString("# Kubernetes-managed hosts file (nodesim).\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n")
	if p.subdomain != "" {
		fmt.Fprintf(&b, "%s\t%s.%s.%s.svc.%s\t%s\n", p.ip, p.hostname, p.subdomain, p.namespace, clusterDomain, p.hostname)
	} else {
		fmt.Fprintf(&b, "%s\t%s\n", p.ip, p.hostname)
	}
	names := make([]string, 0, len(recs))
	for n := range recs {
		names = append(names, n)
	}
	sort.Strings(names)
	nsSuffix := fmt.Sprintf(".%s.svc.%s", p.namespace, clusterDomain)
	for _, n := range names {
		aliases := []string{n, strings.TrimSuffix(n, "."+clusterDomain)}
		if strings.HasSuffix(n, nsSuffix) {
			short := strings.TrimSuffix(n, nsSuffix)
			aliases = append(aliases, short+"."+p.namespace, short)
		}
		for _, ip := range recs[n] {
			fmt.Fprintf(&b, "%s\t%s\n", ip, strings.Join(aliases, " "))
		}
	}
	return b.String()
}

// refresh rewrites every pod's hosts file whose content changed.
func (d *dns) refresh() error {
	recs := d.records()
	d.mu.Lock()
	defer d.mu.Unlock()
	var firstErr error
	for _, p := range d.pods {
		content := hostsContent(p, recs)
		if d.written[p.hostsFile] == content {
			continue
		}
		if err := rewriteInPlace(p.hostsFile, []byte(content)); err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		d.written[p.hostsFile] = content
	}
	return firstErr
}

// rewriteInPlace replaces a file's content without replacing its inode: the
// file is bind-mounted into containers, and a bind mount keeps pointing at the
// old inode when a new file is renamed over the path.
func rewriteInPlace(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("opening %s: %w", path, err)
	}
	if _, err := f.WriteAt(data, 0); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := f.Truncate(int64(len(data))); err != nil {
		f.Close()
		return fmt.Errorf("truncating %s: %w", path, err)
	}
	return f.Close()
}
