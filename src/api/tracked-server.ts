// The life of a unix-socket server: taking its path at start (never deleting what is not a
// stale socket), and stopping within a bounded time. net.Server.close() only stops accepting and then waits for every open connection to end on its own, and clients such as
// kubelet and containerd keep theirs open indefinitely: a SIGTERM would never finish. So the
// server remembers its connections, and closing gives them a grace period, then ends them.
import net from 'node:net';
import { lstat, unlink } from 'node:fs/promises';

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

/** Makes room for a server at socketPath: a stale socket (nobody answering) is removed; a live
 * one, or anything that is not a socket (a file, a directory), is refused, never deleted. */
export async function clearStaleSocket(socketPath: string): Promise<void> {
  let st;
  try {
    st = await lstat(socketPath);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw err;
  }
  if (!st.isSocket()) throw new Error(`${socketPath} exists and is not a socket; refusing to replace it`);
  const live = await new Promise<boolean>((resolve) => {
    const probe = net.connect(socketPath);
    probe.once('connect', () => {
      probe.destroy();
      resolve(true);
    });
    probe.once('error', () => resolve(false));
  });
  if (live) throw new Error(`another process is serving ${socketPath}; is a knit daemon already running?`);
  await unlink(socketPath);
}
