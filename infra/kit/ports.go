package kit

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// PortsFile is where FreePorts notes the ports it handed out, for every
// process on the machine that calls it.
var PortsFile = filepath.Join(os.TempDir(), "concord-free-ports")

// portsHeld is how long a port handed out stays noted: longer than a child
// takes to start listening.
const portsHeld = 5 * time.Minute

// FreePorts returns n distinct TCP ports free on 127.0.0.1 for child
// processes to listen on.
//
// A port is free again the moment FreePorts returns, while its child may
// take seconds to listen on it (migrations, topics), and until then
// anything else may take it and the child fails with "address already in
// use". So the ports come from below the kernel's ephemeral range
// (net.ipv4.ip_local_port_range), from PortsFloor up: there no outgoing
// connection and no listener on port 0 (an httptest server, a child
// started on :0) is ever given one. Among callers of FreePorts, in this
// process or another (the other packages' test binaries), each port handed
// out is noted in PortsFile under a file lock and not handed out again for
// five minutes. Where the range cannot be read, or leaves too few ports, the
// kernel picks them (and the notes still apply).
func FreePorts(n int) ([]int, error) {
	reg, err := openPortsFile() // nil when the file cannot be used
	if err == nil {
		defer reg.close()
	}
	var ports []int
	if lo, hi, ok := belowEphemeral(); ok && hi-lo >= 2*n {
		ports = scanPorts(n, lo, hi, reg)
	} else {
		ports, err = kernelPorts(n, reg)
		if err != nil {
			return nil, err
		}
	}
	if len(ports) < n {
		return nil, fmt.Errorf("%d of %d free ports found", len(ports), n)
	}
	reg.note(ports)
	return ports, nil
}

// PortsFloor is the lowest port FreePorts hands out below the ephemeral
// range: the ports under it are the ones services and the local stack are
// configured with (8081, 19092, …).
const PortsFloor = 20000

// belowEphemeral is [PortsFloor, the ephemeral range's first port).
func belowEphemeral() (lo, hi int, ok bool) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0, 0, false
	}
	var first, last int
	if _, err := fmt.Sscan(string(b), &first, &last); err != nil || first <= PortsFloor {
		return 0, 0, false
	}
	return PortsFloor, first, true
}

// scanPorts takes the first n ports of [lo, hi) from a random one on,
// wrapping round, that are not noted and that it can listen on.
func scanPorts(n, lo, hi int, reg *portsFile) []int {
	ports := make([]int, 0, n)
	start := rand.IntN(hi - lo)
	for i := 0; i < hi-lo && len(ports) < n; i++ {
		p := lo + (start+i)%(hi-lo)
		if reg.noted(p) {
			continue
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			continue // in use
		}
		l.Close()
		ports = append(ports, p)
	}
	return ports
}

// kernelPorts has the kernel pick n ports, holding each until all are
// chosen: asking for one at a time can return the same port twice once the
// first listener is closed.
func kernelPorts(n int, reg *portsFile) ([]int, error) {
	ports := make([]int, 0, n)
	for len(ports) < n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		// Held, handed out or not: the kernel then offers another port.
		defer l.Close()
		p := l.Addr().(*net.TCPAddr).Port
		if reg.noted(p) {
			continue // held, so each noted port is offered once at most
		}
		ports = append(ports, p)
	}
	return ports, nil
}

// portsFile is PortsFile, open and locked: the ports noted and when each
// stops being so.
type portsFile struct {
	f     *os.File
	until map[int]int64 // port → unix nanoseconds
}

// noted reports whether port was handed out in the last portsHeld; with
// no file (r nil) none was.
func (r *portsFile) noted(port int) bool {
	if r == nil {
		return false
	}
	_, ok := r.until[port]
	return ok
}

func openPortsFile() (*portsFile, error) {
	f, err := os.OpenFile(PortsFile, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	r := &portsFile{f: f, until: map[int]int64{}}
	now := time.Now().UnixNano()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var port int
		var until int64
		if _, err := fmt.Sscan(sc.Text(), &port, &until); err == nil && until > now {
			r.until[port] = until
		}
	}
	return r, nil
}

// note records ports as handed out now, with the unexpired ones noted
// before, replacing the file's contents.
func (r *portsFile) note(ports []int) {
	if r == nil {
		return
	}
	until := time.Now().Add(portsHeld).UnixNano()
	for _, p := range ports {
		r.until[p] = until
	}
	if err := r.f.Truncate(0); err != nil {
		return
	}
	if _, err := r.f.Seek(0, 0); err != nil {
		return
	}
	w := bufio.NewWriter(r.f)
	for p, u := range r.until {
		fmt.Fprintf(w, "%d %d\n", p, u)
	}
	_ = w.Flush()
}

func (r *portsFile) close() {
	_ = syscall.Flock(int(r.f.Fd()), syscall.LOCK_UN)
	r.f.Close()
}
