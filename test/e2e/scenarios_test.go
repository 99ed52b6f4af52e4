package e2e

import (
	"testing"
)

func TestRolloutHealthy(t *testing.T) {
	run(t, scenario{name: "healthy"})
}
