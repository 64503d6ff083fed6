package framework

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"sync"
	"testing"
)

// A port the test hands to a process it starts is free when picked and bound by that process
// a moment later. Picked by binding 127.0.0.1:0, it would come from the kernel's ephemeral
// range, where every client connection of the run (the managers' to kube-apiserver,
// kube-apiserver's to the webhooks) takes its local port: one of them could take it in that
// moment, and the process would exit with "address already in use". So ports come from below
// the ephemeral range, where neither a connection nor another bind to port 0 lands, and no
// port is handed out twice in one test binary.
var ports = struct {
	sync.Mutex
	next, high int
	given      map[int]bool
}{}

// lowPorts is the range below the ephemeral one that ports come from: [lowPorts, ephemeral low).
const lowPorts = 20000

// FreePort is a port on 127.0.0.1 that nothing listens on, for a process the test starts.
func FreePort(t *testing.T) int {
	t.Helper()
	ports.Lock()
	defer ports.Unlock()
	if ports.given == nil {
		ports.given = map[int]bool{}
		ports.high = ephemeralLow()
		if ports.high > lowPorts {
			// A random start: two test binaries at once rarely walk the same ports.
			ports.next = lowPorts + rand.IntN(ports.high-lowPorts)
		}
	}
	if ports.high <= lowPorts {
		return kernelPort(t)
	}
	for range ports.high - lowPorts {
		port := ports.next
		ports.next++
		if ports.next == ports.high {
			ports.next = lowPorts
		}
		if ports.given[port] {
			continue
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		l.Close()
		ports.given[port] = true
		return port
	}
	t.Fatalf("no free port on 127.0.0.1 in [%d, %d)", lowPorts, ports.high)
	return 0
}

// ephemeralLow is the low end of the kernel's ephemeral port range (net.ipv4.ip_local_port_range),
// or 0 when it cannot be read.
func ephemeralLow() int {
	data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0
	}
	var low, high int
	if _, err := fmt.Sscan(string(data), &low, &high); err != nil {
		return 0
	}
	return low
}

// kernelPort is a port the kernel picks, where no range lies below the ephemeral one.
func kernelPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	Must(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
