// Package e2e runs rollout scenarios on the real stack: kube-apiserver, kube-controller-manager
// (the real StatefulSet controller), the node simulator running real etcd members with mTLS, and
// the operator. Each scenario bumps the etcd image from 3.6.8 to 3.7.3 under a fault, with a
// writer and monitors running, then audits: every acknowledged write readable, no participating
// pod deleted against DEP-07's invariant, the rollout complete.
package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/etcd-conductor/etcd-conductor/test/stack"
)

var shared struct {
	once sync.Once
	s    *stack.Stack
	err  error
}

// sharedStack starts one stack for the whole package (a control plane per scenario would triple
// the run time) and skips or fails like stack.StartForTest when it cannot run here.
func sharedStack(t *testing.T) *stack.Stack {
	t.Helper()
	stack.RequireEnvironment(t)
	shared.once.Do(func() {
		shared.s, shared.err = stack.Start(context.Background(), stack.Options{})
	})
	if shared.err != nil {
		t.Fatalf("starting the stack: %v", shared.err)
	}
	return shared.s
}

// teardowns are the namespace deletions still under way; TestMain waits for them before the
// stack stops.
var teardowns backgroundTeardowns

type backgroundTeardowns struct {
	wg   sync.WaitGroup
	mu   sync.Mutex
	errs []error
}

func (b *backgroundTeardowns) start(what string, fn func() error) {
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		if err := fn(); err != nil {
			b.mu.Lock()
			b.errs = append(b.errs, fmt.Errorf("%s: %w", what, err))
			b.mu.Unlock()
		}
	}()
}

func (b *backgroundTeardowns) wait() error {
	b.wg.Wait()
	b.mu.Lock()
	defer b.mu.Unlock()
	return errors.Join(b.errs...)
}

// soakEnv, set by make soak, runs the variants make test leaves out to stay within its time: the
// same runner on more members, where the shorter one already covers the path.
const soakEnv = "E2E_SOAK"

// soakOnly skips t unless soakEnv is set; why names what covers its path in make test.
func soakOnly(t *testing.T, why string) {
	t.Helper()
	if os.Getenv(soakEnv) == "" {
		t.Skipf("soak only (%s=1, make soak): %s", soakEnv, why)
	}
}

func TestMain(m *testing.M) {
	ctrl.SetLogger(logr.Discard())
	code := m.Run()
	printSpread(os.Stdout)
	printMatrix(os.Stdout)
	if err := teardowns.wait(); err != nil {
		os.Stderr.WriteString("deleting scenario namespaces: " + err.Error() + "\n")
		code = 1
	}
	if shared.s != nil {
		if err := shared.s.Stop(); err != nil {
			os.Stderr.WriteString("stopping the stack: " + err.Error() + "\n")
			code = 1
		}
	}
	os.Exit(code)
}
