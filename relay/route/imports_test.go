package route

import (
	"os/exec"
	"strings"
	"testing"
)

// TestLayering: the routing rules import neither the relay nor the
// endpoint, and the endpoint does not import the relay: both sides of the
// wire build on this package, not on each other.
func TestLayering(t *testing.T) {
	for pkg, forbidden := range map[string][]string{
		"github.com/urbit-relay/relay/relay/route":    {"github.com/urbit-relay/relay/relay", "github.com/urbit-relay/relay/relay/endpoint"},
		"github.com/urbit-relay/relay/relay/endpoint": {"github.com/urbit-relay/relay/relay"},
	} {
		out, err := exec.Command("go", "list", "-deps", pkg).Output()
		if err != nil {
			t.Skipf("go list: %v", err)
		}
		deps := strings.Fields(string(out))
		for _, f := range forbidden {
			for _, d := range deps {
				if d == f {
					t.Errorf("%s imports %s", pkg, f)
				}
			}
		}
	}
}
