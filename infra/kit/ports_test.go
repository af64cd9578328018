package kit_test

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/concordhq/concord/infra/kit"
)

// notesApart has FreePorts note its ports in a file of the test's own, so
// that the thousands it hands out here are not held from the other tests
// of the machine.
func notesApart(t *testing.T) {
	old := kit.PortsFile
	kit.PortsFile = filepath.Join(t.TempDir(), "ports")
	t.Cleanup(func() { kit.PortsFile = old })
}

func TestFreePortsAreDistinctAndFree(t *testing.T) {
	notesApart(t)
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

// A port handed out is not handed out again while its child may still be
// starting, though it is free: not by a second call of this process, nor
// by another process (another package's test binary).
func TestFreePortsAreNotHandedOutAgainWhileTheirChildrenStart(t *testing.T) {
	if path := os.Getenv("CONCORD_KIT_PORTS_CHILD"); path != "" {
		kit.PortsFile = path
		ports, err := kit.FreePorts(500)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Println(ports)
		return
	}
	notesApart(t)
	first, err := kit.FreePorts(500)
	if err != nil {
		t.Fatal(err)
	}
	// Another process, noting in the same file.
	cmd := exec.Command(os.Args[0], "-test.run", "^TestFreePortsAreNotHandedOutAgainWhileTheirChildrenStart$")
	cmd.Env = append(os.Environ(), "CONCORD_KIT_PORTS_CHILD="+kit.PortsFile)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	var child []int
	for _, f := range strings.Fields(strings.Trim(strings.SplitN(string(out), "\n", 2)[0], "[]")) {
		p, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("child printed %q", out)
		}
		child = append(child, p)
	}
	if len(child) != 500 {
		t.Fatalf("child handed out %d ports, want 500", len(child))
	}
	second, err := kit.FreePorts(500)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]string{}
	for name, ports := range map[string][]int{"the first call": first, "the other process": child, "the second call": second} {
		for _, p := range ports {
			if by, ok := seen[p]; ok {
				t.Fatalf("port %d handed out by %s and again by %s", p, by, name)
			}
			seen[p] = name
		}
	}
}

// The ports come from below the kernel's ephemeral range, which no
// outgoing connection and no listener on port 0 (an httptest server) is
// given a port from: nothing but FreePorts's callers can take them before
// their children listen.
func TestFreePortsAreBelowTheEphemeralRange(t *testing.T) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		t.Skipf("no ephemeral range to stay below on this system: %v", err)
	}
	var first, last int
	if _, err := fmt.Sscan(string(b), &first, &last); err != nil {
		t.Fatalf("ip_local_port_range %q: %v", b, err)
	}
	notesApart(t)
	ports, err := kit.FreePorts(200)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ports {
		if p < kit.PortsFloor || p >= first {
			t.Fatalf("port %d is outside [%d, %d), the ports below the ephemeral range %d–%d", p, kit.PortsFloor, first, first, last)
		}
	}
}
