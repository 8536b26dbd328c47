package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/pion/sctp"
)

// connectMain is agnhost's connectSCTP (test/images/agnhost/connect/connect.go) with the
// association in user space: the same flags, the same fixed prefixes on stderr, the same exit
// codes. Like agnhost's SCTP path it has no REFUSED: a refusal (an ABORT answering the INIT,
// which kernel SCTP reports as ECONNREFUSED) prints "OTHER: connection refused".
func connectMain(args []string) {
	flags := flag.NewFlagSet("connect", flag.ContinueOnError)
	timeout := flags.Duration("timeout", 0, "Maximum time before returning an error")
	protocol := flags.String("protocol", "tcp", "must be sctp here")
	data := flags.String("sctp-data", "hostname", "The SCTP payload send to the server")
	// Flags before and after the address, as agnhost's cobra takes them: the NetworkPolicy e2e
	// suite runs `connect host:port --timeout=1s --protocol=sctp`, the network-policy-api suite
	// `connect --timeout=3s --protocol=sctp host:port`.
	var positional []string
	for rest := args; ; {
		if err := flags.Parse(rest); err != nil {
			positional = nil
			break
		}
		if flags.NArg() == 0 {
			break
		}
		positional = append(positional, flags.Arg(0))
		rest = flags.Args()[1:]
	}
	if len(positional) != 1 {
		fmt.Fprintln(os.Stderr, "UNKNOWN: usage: connect [--timeout=D] --protocol=sctp host:port")
		os.Exit(1)
	}
	if *protocol != "sctp" {
		fmt.Fprintf(os.Stderr, "UNKNOWN: usctp speaks only --protocol=sctp, not %q\n", *protocol)
		os.Exit(1)
	}
	peer, port, err := resolve(positional[0])
	if err != nil {
		fmt.Fprintf(os.Stderr, "DNS: %v\n", err)
		os.Exit(1)
	}
	if peer.IP.To4() == nil {
		fmt.Fprintf(os.Stderr, "OTHER: usctp speaks SCTP over IPv4 only, not to %s\n", peer.IP)
		os.Exit(1)
	}

	timeoutCh := time.After(*timeout)
	errCh := make(chan error)
	go func() {
		assoc, err := dial(peer, port)
		if err != nil {
			errCh <- err
			return
		}
		defer func() { errCh <- assoc.Close() }()
		if _, err := assoc.stream.Write([]byte(*data + "\n")); err != nil {
			errCh <- err
			return
		}
		if _, err := assoc.stream.Read(make([]byte, 1024)); err != nil {
			errCh <- err
			return
		}
	}()

	select {
	case err := <-errCh:
		if err != nil {
			fmt.Fprintf(os.Stderr, "OTHER: %v\n", err)
			os.Exit(1)
		}
	case <-timeoutCh:
		fmt.Fprint(os.Stderr, "TIMEOUT\n")
		os.Exit(1)
	}
}

func resolve(dest string) (*net.IPAddr, uint16, error) {
	host, portText, err := net.SplitHostPort(dest)
	if err != nil {
		return nil, 0, err
	}
	port, err := strconv.ParseUint(portText, 10, 16)
	if err != nil {
		return nil, 0, fmt.Errorf("port %q: %w", portText, err)
	}
	addr, err := net.ResolveIPAddr("ip", host)
	if err != nil {
		return nil, 0, err
	}
	return addr, uint16(port), nil
}

type clientAssociation struct {
	assoc  *sctp.Association
	stream *sctp.Stream
}

// dial opens the association from an ephemeral port, as connect(2) would pick one
// (net.ipv4.ip_local_port_range's default, 32768–60999).
func dial(peer *net.IPAddr, port uint16) (*clientAssociation, error) {
	raw, err := net.DialIP("ip4:132", nil, peer)
	if err != nil {
		return nil, err
	}
	conn := &clientConn{IPConn: raw, ports: ports{uint16(32768 + rand.IntN(60999-32768+1)), port}}
	assoc, err := sctp.ClientWithOptions(clientOptions(conn)...)
	if err != nil {
		raw.Close()
		if cause := conn.cause(); cause != nil {
			return nil, cause
		}
		return nil, err
	}
	conn.established.Store(true)
	stream, err := assoc.OpenStream(0, sctp.PayloadTypeUnknown)
	if err != nil {
		assoc.Close()
		return nil, err
	}
	return &clientAssociation{assoc, stream}, nil
}

// Close ends the association gracefully (SHUTDOWN, SHUTDOWN-ACK, SHUTDOWN-COMPLETE). close(2)
// on a kernel SCTP socket returns at once and reports nothing while the kernel finishes the
// shutdown; a process has no background, so it waits for the shutdown, bounded, and likewise
// reports nothing.
func (c *clientAssociation) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = c.assoc.Shutdown(ctx)
	_ = c.assoc.Close()
	return nil
}

// clientConn is the net.Conn pion runs the association over: a raw socket connected to the
// peer's address (the kernel then gives it only that peer's packets), filtered to this
// association's ports.
type clientConn struct {
	*net.IPConn
	ports       ports // ours → the peer's, as on the wire
	established atomic.Bool

	buf [65536]byte // pion reads from one goroutine

	mu      sync.Mutex
	failure error // why the handshake ended below pion: an ABORT, or an ICMP error
}

func (c *clientConn) cause() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.failure
}

func (c *clientConn) fail(err error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.failure = err
	return err
}

func (c *clientConn) Read(b []byte) (int, error) {
	for {
		n, _, err := c.IPConn.ReadFromIP(c.buf[:]) // it strips the IPv4 header; Read would not
		if err != nil {
			// An ICMP error for the peer surfaces here as the socket's error: protocol
			// unreachable (the peer has neither kernel SCTP nor a raw socket) is ENOPROTOOPT,
			// which kernel SCTP reports too (net/sctp/sm_statefuns.c, cookie_wait_icmp_abort).
			var errno syscall.Errno
			if errors.As(err, &errno) {
				return 0, c.fail(errno)
			}
			return 0, err
		}
		pkt := c.buf[:n]
		if n < headerSize || packetPorts(pkt) != (ports{c.ports.dst, c.ports.src}) || !checksumValid(pkt) {
			continue // another association's, or damaged: dropped as a kernel would
		}
		if !c.established.Load() && hasChunk(pkt, chunkAbort) {
			return 0, c.fail(syscall.ECONNREFUSED)
		}
		rewriteFromWire(pkt)
		return copy(b, pkt), nil
	}
}

func (c *clientConn) Write(b []byte) (int, error) {
	if len(b) < headerSize {
		return 0, errors.New("usctp: short SCTP packet")
	}
	if _, err := c.IPConn.Write(rewriteToWire(b, c.ports)); err != nil {
		return 0, err
	}
	return len(b), nil
}

func clientOptions(conn net.Conn) []sctp.ClientOption {
	var opts []sctp.ClientOption
	for _, o := range associationOptions(conn) {
		opts = append(opts, o)
	}
	return opts
}
