package stack

import (
	"context"
	"fmt"
	"net"
	"sort"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
	"github.com/etcd-conductor/etcd-conductor/test/workload"
)

// Endpoints returns the members' current client endpoints for the workload instruments. They
// call it tens of times a second and act on a recreated member as soon as it serves, so the
// answer comes from a pod watch (memberPods), not from polling: a monitor that learns a new
// address late counts a serving member out, a quorum loss that is the instrument's own (a 300 ms
// re-list did that in a partial batch; a 50 ms one loaded the 2-core host enough to raise the
// idle write jitter by ~20 ms). Should the watch not start, it lists the pods instead.
func (c *EtcdCluster) Endpoints() workload.EndpointsFunc {
	return func() []workload.Endpoint {
		pods, err := c.memberPods()
		if err != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			listed, lerr := c.Pods(ctx)
			if lerr != nil {
				return nil
			}
			pods = make([]*corev1.Pod, 0, len(listed))
			for i := range listed {
				pods = append(pods, &listed[i])
			}
		}
		return c.endpointsOf(pods)
	}
}

// endpointsOf is the client endpoint of each pod that has an address and is not terminating,
// sorted by pod name.
func (c *EtcdCluster) endpointsOf(pods []*corev1.Pod) []workload.Endpoint {
	sort.Slice(pods, func(i, j int) bool { return pods[i].Name < pods[j].Name })
	eps := make([]workload.Endpoint, 0, len(pods))
	for _, p := range pods {
		if p.Status.PodIP == "" || p.DeletionTimestamp != nil {
			continue
		}
		eps = append(eps, workload.Endpoint{
			Name:       p.Name,
			Address:    net.JoinHostPort(p.Status.PodIP, strconv.Itoa(int(resources.DefaultClientPort))),
			ServerName: resources.MemberDNSName(c.Name, c.Namespace, p.Name),
		})
	}
	return eps
}

// memberPods answers from the cluster's pod informer, started on first use and stopped by
// stopWatching (the stack calls it when the namespace goes).
func (c *EtcdCluster) memberPods() ([]*corev1.Pod, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.podInformer == nil {
		if err := c.startWatching(); err != nil {
			return nil, err
		}
	}
	objs := c.podInformer.GetStore().List()
	pods := make([]*corev1.Pod, 0, len(objs))
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok {
			pods = append(pods, p)
		}
	}
	return pods, nil
}

// startWatching starts the pod informer and waits for its first list. Callers hold c.mu.
func (c *EtcdCluster) startWatching() error {
	factory := informers.NewSharedInformerFactoryWithOptions(c.stack.Kube, 0,
		informers.WithNamespace(c.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = c.memberSelector() }))
	informer := factory.Core().V1().Pods().Informer()
	stop := make(chan struct{})
	factory.Start(stop)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		close(stop)
		factory.Shutdown()
		return fmt.Errorf("the pod watch of %s/%s did not sync", c.Namespace, c.Name)
	}
	c.podInformer, c.stopInformer, c.informerFactory = informer, stop, factory
	return nil
}

// stopWatching stops the pod informer, if one runs, and waits for it to end.
func (c *EtcdCluster) stopWatching() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.podInformer == nil {
		return
	}
	close(c.stopInformer)
	c.informerFactory.Shutdown()
	c.podInformer, c.stopInformer, c.informerFactory = nil, nil, nil
}

// memberLabels select the Etcd's member pods; memberSelector is the same for lists and watches.
func (c *EtcdCluster) memberLabels() labels.Set {
	return resources.SelectorLabels(&druidv1alpha1.Etcd{ObjectMeta: metav1.ObjectMeta{Name: c.Name}})
}

func (c *EtcdCluster) memberSelector() string { return c.memberLabels().String() }

// track remembers a cluster the stack created, so that deleting its namespace stops its watch.
func (s *Stack) track(c *EtcdCluster) {
	s.clustersMu.Lock()
	defer s.clustersMu.Unlock()
	s.clusters = append(s.clusters, c)
}

// untrack stops the watches of the clusters in namespace and forgets them.
func (s *Stack) untrack(namespace string) {
	s.clustersMu.Lock()
	defer s.clustersMu.Unlock()
	kept := s.clusters[:0]
	for _, c := range s.clusters {
		if c.Namespace == namespace {
			c.stopWatching()
			continue
		}
		kept = append(kept, c)
	}
	s.clusters = kept
}
