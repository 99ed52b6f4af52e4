package reportauth

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const name = "etcd-conductor-member-report"

func policy() *admissionregistrationv1.ValidatingAdmissionPolicy {
	return &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{FailurePolicy: ptr.To(admissionregistrationv1.Fail)}}
}

func binding() *admissionregistrationv1.ValidatingAdmissionPolicyBinding {
	return &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: name, ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}}}
}

func TestVerify(t *testing.T) {
	now := metav1.Now()
	for _, tc := range []struct {
		name    string
		policy  func(*admissionregistrationv1.ValidatingAdmissionPolicy) *admissionregistrationv1.ValidatingAdmissionPolicy
		binding func(*admissionregistrationv1.ValidatingAdmissionPolicyBinding) *admissionregistrationv1.ValidatingAdmissionPolicyBinding
		want    string // "" authenticated, else a part of the reason
	}{
		{name: "as the chart installs them"},
		{name: "failure policy left to the apiserver's default (Fail)", policy: func(p *admissionregistrationv1.ValidatingAdmissionPolicy) *admissionregistrationv1.ValidatingAdmissionPolicy {
			p.Spec.FailurePolicy = nil
			return p
		}},
		{name: "an empty matchResources matches everything", binding: func(b *admissionregistrationv1.ValidatingAdmissionPolicyBinding) *admissionregistrationv1.ValidatingAdmissionPolicyBinding {
			b.Spec.MatchResources = &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{}, ObjectSelector: &metav1.LabelSelector{}}
			return b
		}},
		{name: "no policy", policy: func(*admissionregistrationv1.ValidatingAdmissionPolicy) *admissionregistrationv1.ValidatingAdmissionPolicy {
			return nil
		},
			want: "ValidatingAdmissionPolicy " + name + " is not installed"},
		{name: "no binding", binding: func(*admissionregistrationv1.ValidatingAdmissionPolicyBinding) *admissionregistrationv1.ValidatingAdmissionPolicyBinding {
			return nil
		},
			want: "ValidatingAdmissionPolicyBinding " + name + " is not installed"},
		{name: "policy being deleted", policy: func(p *admissionregistrationv1.ValidatingAdmissionPolicy) *admissionregistrationv1.ValidatingAdmissionPolicy {
			p.DeletionTimestamp = &now
			return p
		}, want: "being deleted"},
		{name: "fails open", policy: func(p *admissionregistrationv1.ValidatingAdmissionPolicy) *admissionregistrationv1.ValidatingAdmissionPolicy {
			p.Spec.FailurePolicy = ptr.To(admissionregistrationv1.Ignore)
			return p
		}, want: "fails open"},
		{name: "binds another policy", binding: func(b *admissionregistrationv1.ValidatingAdmissionPolicyBinding) *admissionregistrationv1.ValidatingAdmissionPolicyBinding {
			b.Spec.PolicyName = "other"
			return b
		}, want: `binds policy "other"`},
		{name: "only warns", binding: func(b *admissionregistrationv1.ValidatingAdmissionPolicyBinding) *admissionregistrationv1.ValidatingAdmissionPolicyBinding {
			b.Spec.ValidationActions = []admissionregistrationv1.ValidationAction{admissionregistrationv1.Warn, admissionregistrationv1.Audit}
			return b
		}, want: "does not deny"},
		{name: "narrowed to some namespaces", binding: func(b *admissionregistrationv1.ValidatingAdmissionPolicyBinding) *admissionregistrationv1.ValidatingAdmissionPolicyBinding {
			b.Spec.MatchResources = &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"x": "y"}}}
			return b
		}, want: "narrows"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, b := policy(), binding()
			if tc.policy != nil {
				p = tc.policy(p)
			}
			if tc.binding != nil {
				b = tc.binding(b)
			}
			got := Verify(name, p, b)
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("Verify = %q, want %q", got, tc.want)
			}
		})
	}
}

// reader serves the objects it holds, or err.
type reader struct {
	objs  map[string]client.Object // by kind
	err   error
	reads int
}

func (r *reader) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	r.reads++
	if r.err != nil {
		return r.err
	}
	kind := "policy"
	if _, ok := obj.(*admissionregistrationv1.ValidatingAdmissionPolicyBinding); ok {
		kind = "binding"
	}
	src, ok := r.objs[kind]
	if !ok || src.GetName() != key.Name {
		return apierrors.NewNotFound(schema.GroupResource{Resource: kind}, key.Name)
	}
	switch o := obj.(type) {
	case *admissionregistrationv1.ValidatingAdmissionPolicy:
		*o = *src.(*admissionregistrationv1.ValidatingAdmissionPolicy)
	case *admissionregistrationv1.ValidatingAdmissionPolicyBinding:
		*o = *src.(*admissionregistrationv1.ValidatingAdmissionPolicyBinding)
	}
	return nil
}

func (r *reader) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return errors.New("not listed")
}

func TestChecker(t *testing.T) {
	ctx := context.Background()
	t.Run("not configured: unauthenticated, nothing read", func(t *testing.T) {
		r := &reader{}
		if got := NewChecker(Config{Reader: r}).Unauthenticated(ctx); !strings.Contains(got, "memberReports.admissionPolicy") || r.reads != 0 {
			t.Errorf("got %q after %d reads", got, r.reads)
		}
	})
	t.Run("trusted without a policy", func(t *testing.T) {
		if got := NewChecker(Config{Reader: &reader{}, TrustUnauthenticated: true}).Unauthenticated(ctx); got != "" {
			t.Errorf("got %q", got)
		}
	})
	t.Run("installed, then removed: noticed after the interval", func(t *testing.T) {
		r := &reader{objs: map[string]client.Object{"policy": policy(), "binding": binding()}}
		c := NewChecker(Config{Reader: r, AdmissionPolicy: name, CheckInterval: time.Minute})
		at := time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC)
		c.now = func() time.Time { return at }
		if got := c.Unauthenticated(ctx); got != "" {
			t.Fatalf("installed: %q", got)
		}
		delete(r.objs, "binding")
		at = at.Add(30 * time.Second)
		if got := c.Unauthenticated(ctx); got != "" || r.reads != 2 {
			t.Fatalf("within the interval: %q after %d reads, want the verdict kept without a read", got, r.reads)
		}
		at = at.Add(31 * time.Second)
		if got := c.Unauthenticated(ctx); !strings.Contains(got, "Binding "+name+" is not installed") {
			t.Fatalf("after the interval: %q", got)
		}
	})
	t.Run("a refused read is a reason; a failed one keeps the last verdict", func(t *testing.T) {
		r := &reader{err: apierrors.NewForbidden(schema.GroupResource{Resource: "validatingadmissionpolicies"}, name, errors.New("no"))}
		c := NewChecker(Config{Reader: r, AdmissionPolicy: name, CheckInterval: time.Nanosecond})
		if got := c.Unauthenticated(ctx); !strings.Contains(got, "may not read") {
			t.Fatalf("refused: %q", got)
		}
		r.err = errors.New("connection refused")
		if got := c.Unauthenticated(ctx); !strings.Contains(got, "may not read") {
			t.Fatalf("failed after a refusal: %q, want the refusal kept", got)
		}
		fresh := NewChecker(Config{Reader: r, AdmissionPolicy: name})
		if got := fresh.Unauthenticated(ctx); !strings.Contains(got, "could not read") {
			t.Fatalf("failed with no verdict yet: %q", got)
		}
	})
}
