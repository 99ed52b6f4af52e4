package stack

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/etcd-conductor/etcd-conductor/test/helmcli"
	"github.com/etcd-conductor/etcd-conductor/test/localcluster"
)

// memberLeasePolicyTemplate is the chart template holding the member Lease
// ValidatingAdmissionPolicy and its binding.
const memberLeasePolicyTemplate = "templates/member-lease-policy.yaml"

// policyRelease names the rendered objects; a chart installed on the stack under another release
// name (helme2e) brings its own copy, which enforces the same rule.
const policyRelease = "stack"

// InstallMemberLeasePolicy renders the chart's member Lease policy with helm and creates it, so the
// member-agents of an operator running in-process are held to exactly what an installed chart
// enforces: each pod writes only its own Lease.
func InstallMemberLeasePolicy(ctx context.Context, kube kubernetes.Interface, helmHome string) error {
	return InstallChartPolicy(ctx, kube, helmHome, memberLeasePolicyTemplate, policyRelease, "")
}

// MemberReportPolicyTemplate is the chart template holding the member report
// ValidatingAdmissionPolicy and its binding: only the operator and each member pod, as itself,
// write what the member reports on its Lease. Rendered as release policyRelease it is named
// framework.StackMemberReportPolicy, the policy the in-process operator checks.
const MemberReportPolicyTemplate = "templates/member-report-policy.yaml"

// InstallMemberReportPolicy renders the chart's member report policy with helm and creates it,
// so the reports the operator restores on are authenticated on the stack as on an installed
// chart.
func InstallMemberReportPolicy(ctx context.Context, kube kubernetes.Interface, helmHome string) error {
	return InstallChartPolicy(ctx, kube, helmHome, MemberReportPolicyTemplate, policyRelease, "")
}

// ComponentProtectionPolicyTemplate is the chart template holding the component protection
// ValidatingAdmissionPolicy and its binding. It is not installed on the stack: it lets only the
// chart's ServiceAccount write managed objects, and an operator running in-process is not it.
const ComponentProtectionPolicyTemplate = "templates/component-protection-policy.yaml"

// InstallChartPolicy renders one of the chart's policy templates with helm, as the release
// release in namespace (empty: helm's default) would install it, and creates its one
// ValidatingAdmissionPolicy and binding.
func InstallChartPolicy(ctx context.Context, kube kubernetes.Interface, helmHome, template, release, namespace string) error {
	// Rendered for the cluster's version, as `helm install` against it would.
	version, err := kube.Discovery().ServerVersion()
	if err != nil {
		return fmt.Errorf("reading the apiserver's version: %w", err)
	}
	rendered, err := renderChartTemplate(ctx, helmHome, template, version.GitVersion, release, namespace)
	if err != nil {
		return err
	}
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(rendered)))
	var policies, bindings int
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("reading the rendered %s: %w", template, err)
		}
		var head metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &head); err != nil {
			return fmt.Errorf("reading the rendered %s: %w", template, err)
		}
		switch head.Kind {
		case "":
			continue
		case "ValidatingAdmissionPolicy":
			policy := &admissionregistrationv1.ValidatingAdmissionPolicy{}
			if err := yaml.UnmarshalStrict(doc, policy); err != nil {
				return fmt.Errorf("decoding the policy of %s: %w", template, err)
			}
			_, err = kube.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, policy, metav1.CreateOptions{})
			policies++
		case "ValidatingAdmissionPolicyBinding":
			binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
			if err := yaml.UnmarshalStrict(doc, binding); err != nil {
				return fmt.Errorf("decoding the policy binding of %s: %w", template, err)
			}
			_, err = kube.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, binding, metav1.CreateOptions{})
			bindings++
		default:
			return fmt.Errorf("unexpected %s in %s", head.Kind, template)
		}
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating the policy of %s: %w", template, err)
		}
	}
	if policies != 1 || bindings != 1 {
		return fmt.Errorf("%s rendered %d policies and %d bindings, want one each", template, policies, bindings)
	}
	return nil
}

// renderChartTemplate runs `helm template --show-only` on the chart of this checkout.
func renderChartTemplate(ctx context.Context, helmHome, template, kubeVersion, release, namespace string) ([]byte, error) {
	helm, err := helmcli.Binary()
	if err != nil {
		return nil, err
	}
	root, err := localcluster.RepoRoot()
	if err != nil {
		return nil, err
	}
	args := []string{"template", release, filepath.Join(root, "charts", "etcd-conductor"),
		"--show-only", template, "--kube-version", kubeVersion}
	if namespace != "" {
		args = append(args, "--namespace", namespace)
	}
	out, err := helmcli.Run(ctx, helm, helmHome, args...)
	if err != nil {
		return nil, fmt.Errorf("rendering %s: %w", template, err)
	}
	return []byte(out), nil
}
