// usctp: the two SCTP roles of agnhost (k8s.io/kubernetes test/images/agnhost, `connect
// --protocol=sctp` and `porter`'s SERVE_SCTP_PORT_*) for a kernel built without SCTP
// (CONFIG_IP_SCTP off), as knit's test machine is. The associations run in user space:
// github.com/pion/sctp speaks the protocol (INIT, INIT-ACK, COOKIE-ECHO, COOKIE-ACK, DATA,
// SACK, SHUTDOWN; CRC32c) over raw IPv4 sockets of protocol 132, so the packets on the wire are
// genuine SCTP and the node's netfilter rules (`meta l4proto sctp`, `th dport`) judge them as
// they would a kernel's. A kernel with no SCTP handler gives protocol 132 to raw sockets
// (net/ipv4/ip_input.c, ip_protocol_deliver_rcu) and sends ICMP protocol-unreachable only when
// no raw socket took the packet.
//
//	usctp connect [--timeout=D] --protocol=sctp [--sctp-data=S] host:port
//	usctp porter <upstream agnhost> porter [args...]
//
// IPv4 only: the suite knit runs pokes IPv4 pod addresses.
package main

import (
	"fmt"
	"io"
	"net"
	"os"

	"github.com/pion/logging"
	"github.com/pion/sctp"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	switch os.Args[1] {
	case "connect":
		connectMain(os.Args[2:])
	case "porter":
		if len(os.Args) < 3 {
			usage()
		}
		porterMain(os.Args[2], os.Args[3:])
	default:
		usage()
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: usctp connect [--timeout=D] --protocol=sctp [--sctp-data=S] host:port\n"+
		"       usctp porter <upstream agnhost> porter [args...]")
	os.Exit(2)
}

// associationOptions: the same for both ends. Interleaving (I-DATA, RFC 8260) is pion's default
// and off in kernel SCTP unless net.sctp.intl_enable is set, so it is off here: plain DATA chunks.
func associationOptions(conn net.Conn) []sctp.AssociationOption {
	return []sctp.AssociationOption{
		sctp.WithNetConn(conn), sctp.WithLoggerFactory(quietLogs()), sctp.WithEnableInterleaving(false),
	}
}

// quietLogs keeps pion's own logging off stderr: the suite reads any stderr from connect as
// a failed connection (network-policy-api conformance/utils/kubernetes/helper.go, doPokeServer).
func quietLogs() logging.LoggerFactory {
	f := logging.NewDefaultLoggerFactory()
	f.Writer = io.Discard
	f.DefaultLogLevel = logging.LogLevelDisabled
	return f
}
