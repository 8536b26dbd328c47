package main

import (
	"log"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
)

// sctpPrefix names the variables agnhost porter serves SCTP for: SERVE_SCTP_PORT_<port>=<reply>
// (test/images/agnhost/porter/porter.go).
const sctpPrefix = "SERVE_SCTP_PORT_"

// porterMain serves the SERVE_SCTP_PORT_* variables here and runs the upstream porter, without
// them, for the TCP, UDP and TLS ones; it lives as long as the upstream porter does. With no
// SCTP variable it is the upstream porter.
func porterMain(upstream string, args []string) {
	replies := map[uint16]string{}
	var env []string
	for _, kv := range os.Environ() {
		key, value, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(key, sctpPrefix) {
			env = append(env, kv)
			continue
		}
		port, err := strconv.ParseUint(strings.TrimPrefix(key, sctpPrefix), 10, 16)
		if err != nil {
			log.Fatalf("usctp: %s: not a port", key)
		}
		replies[uint16(port)] = value
	}
	if len(replies) == 0 {
		log.Fatalf("usctp: %v", syscall.Exec(upstream, append([]string{upstream}, args...), env))
	}
	srv, err := listen(replies)
	if err != nil {
		log.Fatalf("usctp: cannot serve SCTP: %v", err) // as agnhost porter's ListenSCTP failing
	}
	for port := range replies {
		log.Printf("usctp: serving SCTP port %d in user space (pion/sctp over raw IP; this kernel has no SCTP)", port)
	}
	go srv.run()

	cmd := exec.Command(upstream, args...)
	cmd.Env, cmd.Stdin, cmd.Stdout, cmd.Stderr = env, os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		log.Fatalf("usctp: %v", err)
	}
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		for sig := range signals {
			_ = cmd.Process.Signal(sig)
		}
	}()
	_ = cmd.Wait()
	code := cmd.ProcessState.ExitCode()
	if code < 0 {
		code = 1 // ended by a signal
	}
	os.Exit(code)
}
