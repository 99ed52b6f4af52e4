package nodesim

import (
	"errors"
	"fmt"
	"net"
	"strings"

	"golang.org/x/net/dns/dnsmessage"
	corev1 "k8s.io/api/core/v1"
)

// dnsTTL matches the CoreDNS kubernetes plugin's default.
const dnsTTL = 5

// serveDNS answers pods' DNS queries on the gateway, as the cluster DNS
// Service would: A records from the same table as the hosts files, NODATA for
// other types of a known name, NXDOMAIN for everything else (there is no
// upstream). Without it, a name missing from /etc/hosts would wait out
// resolver timeouts against an unreachable nameserver instead of failing fast.
func (s *Simulator) serveDNS() error {
	conn, err := net.ListenPacket("udp4", net.JoinHostPort(s.network.GatewayIP(), "53"))
	if err != nil {
		return fmt.Errorf("cluster DNS on %s:53: %w", s.network.GatewayIP(), err)
	}
	s.dnsConn = conn
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		buf := make([]byte, 1500)
		for {
			n, from, err := conn.ReadFrom(buf)
			if err != nil {
				if !errors.Is(err, net.ErrClosed) {
					s.log.Error(err, "cluster DNS read")
				}
				return
			}
			resp, err := s.dns.answer(buf[:n])
			if err != nil {
				s.log.V(1).Info("cluster DNS: bad query", "from", from.String(), "error", err.Error())
				continue
			}
			_, _ = conn.WriteTo(resp, from)
		}
	}()
	return nil
}

func (d *dns) answer(query []byte) ([]byte, error) {
	var p dnsmessage.Parser
	h, err := p.Start(query)
	if err != nil {
		return nil, err
	}
	q, err := p.Question()
	if err != nil {
		return nil, err
	}
	name := strings.ToLower(strings.TrimSuffix(q.Name.String(), "."))
	ips, known := d.records()[name]
	rcode := dnsmessage.RCodeSuccess
	if !known {
		rcode = dnsmessage.RCodeNameError
	}
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{
		ID: h.ID, Response: true, Authoritative: true,
		RecursionDesired: h.RecursionDesired, RCode: rcode,
	})
	b.EnableCompression()
	if err := b.StartQuestions(); err != nil {
		return nil, err
	}
	if err := b.Question(q); err != nil {
		return nil, err
	}
	if err := b.StartAnswers(); err != nil {
		return nil, err
	}
	if q.Type == dnsmessage.TypeA && q.Class == dnsmessage.ClassINET {
		for _, ip := range ips {
			v4 := net.ParseIP(ip).To4()
			if v4 == nil {
				continue
			}
			rh := dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: dnsTTL}
			if err := b.AResource(rh, dnsmessage.AResource{A: [4]byte(v4)}); err != nil {
				return nil, err
			}
		}
	}
	return b.Finish()
}

// resolvConf is kubelet's ClusterFirst resolv.conf for a pod, pointing at
// our DNS server, with the pod's dnsConfig merged in. ok is false for
// dnsPolicy Default (the host's resolv.conf applies).
func resolvConf(pod *corev1.Pod, nameserver string) (content string, ok bool) {
	policy := pod.Spec.DNSPolicy
	if policy == corev1.DNSDefault {
		return "", false
	}
	var servers, searches []string
	options := []string{"ndots:5"}
	if policy != corev1.DNSNone {
		servers = []string{nameserver}
		searches = []string{pod.Namespace + ".svc." + clusterDomain, "svc." + clusterDomain, clusterDomain}
	}
	if c := pod.Spec.DNSConfig; c != nil {
		servers = append(servers, c.Nameservers...)
		searches = append(searches, c.Searches...)
		if policy == corev1.DNSNone {
			options = nil
		}
		for _, o := range c.Options {
			opt := o.Name
			if o.Value != nil {
				opt += ":" + *o.Value
			}
			options = append(options, opt)
		}
	}
	var b strings.Builder
	for _, s := range servers {
		fmt.Fprintf(&b, "nameserver %s\n", s)
	}
	if len(searches) > 0 {
		fmt.Fprintf(&b, "search %s\n", strings.Join(searches, " "))
	}
	if len(options) > 0 {
		fmt.Fprintf(&b, "options %s\n", strings.Join(options, " "))
	}
	return b.String(), true
}
