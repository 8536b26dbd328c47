package main

import (
	"context"
	"fmt"
	"log"
	"net"
	"net/netip"
	"os"
	"sync"
	"time"

	"github.com/pion/sctp"
	"github.com/pion/transport/v5/deadline"
)

// An association the peer abandons mid-handshake, or that will not shut down, is dropped after
// these; kernel SCTP bounds both by retransmission limits (Max.Init.Retransmits,
// Association.Max.Retrans, RFC 9260 §16).
const (
	handshakeLimit = 30 * time.Second
	shutdownLimit  = 10 * time.Second
)

type assocKey struct {
	peer     netip.Addr
	peerPort uint16
	port     uint16
}

// server answers SCTP on the ports of replies from one raw socket: packets of the associations
// it has are handed to their pion association; an INIT for a port it serves starts one; an
// INIT for a port no process in this netns serves is answered with the ABORT kernel SCTP sends;
// anything else belongs to another process in this netns (another server, or a `connect`
// beside it) and is left alone, since every raw socket sees every packet.
//
// The kernel keeps one table of bound ports per netns; here the servers of one netns (agnhost
// porter pods run one container per port) share one through abstract unix socket names, which
// are per netns too (unix(7)): each server binds a name for each port it serves, and the one
// that holds refuserName sends the ABORTs.
type server struct {
	raw     *net.IPConn
	replies map[uint16]string
	// Touched by run alone: the names kept open (the ports' and, once taken, refuserName).
	names    []net.Listener
	refusing bool

	mu     sync.Mutex
	assocs map[assocKey]*serverConn
}

const refuserName = "@knit-usctp/refuser"

func portName(port uint16) string { return fmt.Sprintf("@knit-usctp/sctp-port/%d", port) }

func listen(replies map[uint16]string) (*server, error) {
	s := &server{replies: replies, assocs: map[assocKey]*serverConn{}}
	for port := range replies {
		name, err := net.Listen("unix", portName(port))
		if err != nil {
			return nil, fmt.Errorf("port %d: %w", port, err) // another server has it: EADDRINUSE
		}
		s.names = append(s.names, name)
	}
	raw, err := net.ListenIP("ip4:132", &net.IPAddr{IP: net.IPv4zero})
	if err != nil {
		return nil, err
	}
	s.raw = raw
	return s, nil
}

// shouldRefuse: no server in this netns has port, and this one is the netns's refuser.
func (s *server) shouldRefuse(port uint16) bool {
	probe, err := net.Listen("unix", portName(port))
	if err != nil {
		return false // served by another process
	}
	probe.Close()
	if !s.refusing {
		if name, err := net.Listen("unix", refuserName); err == nil {
			s.names = append(s.names, name)
			s.refusing = true
		}
	}
	return s.refusing
}

func (s *server) run() {
	buf := make([]byte, 65536)
	for {
		n, from, err := s.raw.ReadFromIP(buf) // the IPv4 header stripped
		if err != nil {
			log.Fatalf("usctp: raw SCTP socket: %v", err)
		}
		pkt := append([]byte(nil), buf[:n]...)
		if !checksumValid(pkt) {
			continue
		}
		peer, _ := netip.AddrFromSlice(from.IP.To4())
		p := packetPorts(pkt)
		key := assocKey{peer, p.src, p.dst}

		s.mu.Lock()
		conn := s.assocs[key]
		reply, served := s.replies[p.dst]
		if conn == nil && served && firstChunkIsInit(pkt) {
			conn = s.newConn(key, from)
			go conn.serve(reply)
		}
		s.mu.Unlock()

		switch {
		case conn != nil:
			rewriteFromWire(pkt)
			conn.deliver(pkt)
		case firstChunkIsInit(pkt) && !served && s.shouldRefuse(p.dst):
			_, _ = s.raw.WriteTo(abortForInit(pkt), from)
		}
	}
}

// newConn: the caller holds s.mu.
func (s *server) newConn(key assocKey, peer *net.IPAddr) *serverConn {
	c := &serverConn{
		server: s, key: key, peer: peer,
		in:           make(chan []byte, 64),
		closed:       make(chan struct{}),
		readDeadline: deadline.New(),
	}
	s.assocs[key] = c
	return c
}

// serve is agnhost porter's serveSCTPPort for one association: write the reply, close.
func (c *serverConn) serve(reply string) {
	defer c.Close()
	abandon := time.AfterFunc(handshakeLimit, func() { c.Close() })
	assoc, err := sctp.ServerWithOptions(serverOptions(c)...)
	abandon.Stop()
	if err != nil {
		return
	}
	defer assoc.Close()
	stream, err := assoc.OpenStream(0, sctp.PayloadTypeUnknown)
	if err == nil {
		_, err = stream.Write([]byte(reply))
	}
	if err != nil {
		log.Printf("usctp: failed to send response to %s: %v", c.peer, err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), shutdownLimit)
	defer cancel()
	_ = assoc.Shutdown(ctx)
}

// serverConn is the net.Conn of one association: what the server's socket reads for it comes
// in on a channel; what pion writes goes out the shared socket to the peer.
type serverConn struct {
	server *server
	key    assocKey
	peer   *net.IPAddr

	in           chan []byte
	closed       chan struct{}
	closeOnce    sync.Once
	readDeadline *deadline.Deadline
}

// deliver drops a packet when the association is this far behind, as a full socket buffer
// would; SCTP retransmits.
func (c *serverConn) deliver(pkt []byte) {
	select {
	case c.in <- pkt:
	default:
	}
}

func (c *serverConn) Read(b []byte) (int, error) {
	select {
	case pkt := <-c.in:
		return copy(b, pkt), nil
	case <-c.closed:
		return 0, net.ErrClosed
	case <-c.readDeadline.Done():
		return 0, os.ErrDeadlineExceeded
	}
}

func (c *serverConn) Write(b []byte) (int, error) {
	if len(b) < headerSize {
		return 0, net.ErrWriteToConnected
	}
	if _, err := c.server.raw.WriteTo(rewriteToWire(b, ports{c.key.port, c.key.peerPort}), c.peer); err != nil {
		return 0, err
	}
	return len(b), nil
}

func (c *serverConn) Close() error {
	c.closeOnce.Do(func() {
		close(c.closed)
		c.server.mu.Lock()
		delete(c.server.assocs, c.key)
		c.server.mu.Unlock()
	})
	return nil
}

func (c *serverConn) LocalAddr() net.Addr  { return c.server.raw.LocalAddr() }
func (c *serverConn) RemoteAddr() net.Addr { return c.peer }

func (c *serverConn) SetDeadline(t time.Time) error { return c.SetReadDeadline(t) }

func (c *serverConn) SetReadDeadline(t time.Time) error {
	c.readDeadline.Set(t)
	return nil
}

// SetWriteDeadline: a write to a raw socket does not wait for the peer, so there is nothing
// to bound.
func (c *serverConn) SetWriteDeadline(time.Time) error { return nil }

func serverOptions(conn net.Conn) []sctp.ServerOption {
	var opts []sctp.ServerOption
	for _, o := range associationOptions(conn) {
		opts = append(opts, o)
	}
	return opts
}
