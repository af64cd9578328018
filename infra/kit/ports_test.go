package kit_test

import (
	"net"
	"strconv"
	"testing"

	"github.com/concordhq/concord/infra/kit"
)

func TestFreePortsAreDistinctAndFree(t *testing.T) {
	ports, err := kit.FreePorts(1000)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if seen[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		seen[p] = true
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			t.Fatalf("port %d is not free after FreePorts returned: %v", p, err)
		}
		l.Close()
	}
}
