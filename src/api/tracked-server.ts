// A unix-socket server that can stop within a bounded time. net.Server.close() only stops
// accepting and then waits for every open connection to end on its own, and clients such as
// kubelet and containerd keep theirs open indefinitely: a SIGTERM would never finish. So the
// server remembers its connections, and closing gives them a grace period, then ends them.
import type net from 'node:net';

export interface TrackedServer {
  /** Stop accepting; wait up to graceMs for open connections to finish; then destroy them. */
  close(graceMs: number): Promise<void>;
}

export function trackConnections(server: net.Server): TrackedServer {
  const open = new Set<net.Socket>();
  server.on('connection', (s: net.Socket) => {
    open.add(s);
    s.once('close', () => open.delete(s));
  });
  let closing: Promise<void> | undefined;
  return {
    close(graceMs) {
      return (closing ??= new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          for (const s of open) s.destroy();
        }, graceMs);
        timer.unref();
        server.close(() => {
          clearTimeout(timer);
          resolve();
        });
      }));
    },
  };
}
