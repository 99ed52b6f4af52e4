package localcluster

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/etcd-conductor/etcd-conductor/etcdclient/etcdtest"
)

func TestControllerFlag(t *testing.T) {
	for _, tc := range []struct {
		names []string
		want  string
	}{
		{names: []string{"statefulset", "garbage-collector"}, want: "statefulset-controller,garbage-collector-controller"},
		{names: []string{"statefulset-controller", "*", "-node-lifecycle"}, want: "statefulset-controller,*,-node-lifecycle-controller"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			if got := controllerFlag(tc.names); got != tc.want {
				t.Errorf("controllerFlag(%q) = %q, want %q", tc.names, got, tc.want)
			}
		})
	}
}

// withDefaultsOr runs o.withDefaults and, when wantErr is set, checks it fails with an error
// containing it; ok tells whether the case goes on with the options it returns.
func withDefaultsOr(t *testing.T, o Options, wantErr string) (Options, bool) {
	t.Helper()
	got, err := o.withDefaults()
	if wantErr != "" {
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Fatalf("err = %v, want one containing %q", err, wantErr)
		}
		return got, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return got, true
}

func TestWithDefaultsBindAddress(t *testing.T) {
	bin := fakeBinDir(t)
	for _, tc := range []struct {
		bind    string
		want    string
		wantErr string
	}{
		{bind: "", want: "127.0.0.1"},
		{bind: "10.213.0.1", want: "10.213.0.1"},
		{bind: "0.0.0.0", wantErr: "every interface"},
		{bind: "::", wantErr: "every interface"},
		{bind: "localhost", wantErr: "not an IP"},
	} {
		t.Run(tc.bind, func(t *testing.T) {
			o, ok := withDefaultsOr(t, Options{BinDir: bin, BindAddress: tc.bind}, tc.wantErr)
			if !ok {
				return
			}
			if o.BindAddress != tc.want {
				t.Errorf("BindAddress = %q, want %q", o.BindAddress, tc.want)
			}
		})
	}
}

func TestServiceCIDR(t *testing.T) {
	bin := fakeBinDir(t)
	for _, tc := range []struct {
		cidr, want, wantSvcIP, wantErr string
	}{
		{cidr: "", want: DefaultServiceCIDR, wantSvcIP: "10.0.0.1"},
		{cidr: "10.0.0.0/16", want: "10.0.0.0/16", wantSvcIP: "10.0.0.1"},
		{cidr: "10.96.0.0/12", want: "10.96.0.0/12", wantSvcIP: "10.96.0.1"},
		{cidr: "10.0.0.0/8", wantErr: "outside /12"},
		{cidr: "10.213.4.0/24", wantErr: "overlaps"},
		{cidr: "10.208.0.0/12", wantErr: "overlaps"},
		{cidr: "fd00::/112", wantErr: "not an IPv4"},
		{cidr: "10.0.0.1", wantErr: "not an IPv4 CIDR"},
	} {
		t.Run(tc.cidr, func(t *testing.T) {
			o, ok := withDefaultsOr(t, Options{BinDir: bin, ServiceCIDR: tc.cidr}, tc.wantErr)
			if !ok {
				return
			}
			if o.ServiceCIDR != tc.want {
				t.Errorf("ServiceCIDR = %q, want %q", o.ServiceCIDR, tc.want)
			}
			ip, err := kubernetesServiceIP(o.ServiceCIDR)
			if err != nil || ip.String() != tc.wantSvcIP {
				t.Errorf("kubernetes Service IP = %v (%v), want %s", ip, err, tc.wantSvcIP)
			}
		})
	}
}

// recordingTB captures what SkipWithoutBinaries does instead of ending the test.
type recordingTB struct {
	testing.TB
	skipped, failed string
}

func (r *recordingTB) Helper() {}
func (r *recordingTB) Skipf(format string, args ...any) {
	r.skipped = fmt.Sprintf(format, args...)
}
func (r *recordingTB) Fatalf(format string, args ...any) {
	r.failed = fmt.Sprintf(format, args...)
}

func TestSkipWithoutBinaries(t *testing.T) {
	for _, tc := range []struct {
		name       string
		ci         string
		binDirEnv  string
		binDir     string
		wantSkip   bool
		wantFail   bool
		wantInText string
	}{
		{name: "missing locally skips", ci: "", binDir: t.TempDir(), wantSkip: true, wantInText: "make tools"},
		{name: "missing under CI fails", ci: "true", binDir: t.TempDir(), wantFail: true, wantInText: "make tools"},
		{name: "missing with the bin dir named fails", binDirEnv: "/named", binDir: t.TempDir(), wantFail: true, wantInText: "make tools"},
		{name: "present runs", ci: "true", binDir: fakeBinDir(t)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// make exports both; each case sets its own so it tests what it names wherever it runs.
			t.Setenv("CI", tc.ci)
			t.Setenv(etcdtest.BinDirEnv, tc.binDirEnv)
			rec := &recordingTB{TB: t}
			SkipWithoutBinaries(rec, tc.binDir)
			if (rec.skipped != "") != tc.wantSkip || (rec.failed != "") != tc.wantFail {
				t.Fatalf("skipped %q, failed %q; want skip %v, fail %v", rec.skipped, rec.failed, tc.wantSkip, tc.wantFail)
			}
			if msg := rec.skipped + rec.failed; !strings.Contains(msg, tc.wantInText) {
				t.Errorf("message %q lacks %q", msg, tc.wantInText)
			}
		})
	}
}

func fakeBinDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, name := range []string{EtcdBinary, APIServerBinary, ControllerManagerBinary} {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
