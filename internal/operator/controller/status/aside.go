package status

import (
	"slices"
	"strings"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/contract/memberlease"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
)

// AsideReports are the reports of data kept aside (memberlease.AnnotationDataAside) on the
// member Leases etcd controls, by Lease (member) name; a Lease without a readable report is
// left out. A member pod or a namespace user can write these: they are only reported (in
// status.dataAside and the data-aside metrics), nothing acts on them. Pure.
func AsideReports(etcd *druidv1alpha1.Etcd, leases []coordinationv1.Lease) map[string]memberlease.DataAside {
	out := map[string]memberlease.DataAside{}
	for _, l := range resources.ControlledLeases(etcd, leases) {
		if d, ok := memberlease.ParseDataAside(l.Annotations); ok {
			out[l.Name] = d
		}
	}
	return out
}

// dataAside lists the reported data dirs for status.dataAside, by member, oldest first: at most
// memberlease.MaxAsideListed per member, the newest.
func dataAside(reports map[string]memberlease.DataAside) []druidv1alpha1.DataAside {
	var out []druidv1alpha1.DataAside
	for member, d := range reports {
		for _, a := range d.Newest {
			out = append(out, druidv1alpha1.DataAside{Member: member, Path: a.Path, KeptSince: metav1.NewTime(a.Time.UTC()), Bytes: a.Bytes})
		}
	}
	slices.SortFunc(out, func(a, b druidv1alpha1.DataAside) int {
		if c := strings.Compare(a.Member, b.Member); c != 0 {
			return c
		}
		if c := a.KeptSince.Compare(b.KeptSince.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Path, b.Path)
	})
	return out
}
