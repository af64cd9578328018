package kit

import (
	"errors"
	"net"
)

// FreePorts returns n distinct TCP ports free on 127.0.0.1 for child
// processes to listen on. Every port stays held until all are chosen:
// asking for one free port at a time can return the same port twice once
// the first listener is closed, and then two children race for it.
func FreePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	var errs []error
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			errs = append(errs, err)
			break
		}
		defer func() { errs = append(errs, l.Close()) }()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	if len(ports) < n {
		return nil, errors.Join(errs...)
	}
	return ports, nil
}
