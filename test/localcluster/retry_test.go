package localcluster

import (
	"net"
	"strings"
	"testing"

	"github.com/etcd-conductor/etcd-conductor/etcdclient/etcdtest"
)

// A port taken between picking and binding makes the child exit; Start
// must notice the conflict and start over on fresh ports.
func TestStartRetriesAfterPortConflict(t *testing.T) {
	SkipWithoutBinaries(t, "")
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	calls := 0
	freePort = func(host string) (int, error) {
		calls++
		if calls == 1 { // etcd's client port
			return taken.Addr().(*net.TCPAddr).Port, nil
		}
		return etcdtest.FreePort(host)
	}
	t.Cleanup(func() { freePort = etcdtest.FreePort })

	var log strings.Builder
	c := StartForTest(t, Options{Log: &log})
	if !strings.Contains(log.String(), "retrying") {
		t.Errorf("Start did not report a retry:\n%s", log.String())
	}
	if _, err := c.clientset.Discovery().ServerVersion(); err != nil {
		t.Errorf("cluster unusable after the retry: %v", err)
	}
}
