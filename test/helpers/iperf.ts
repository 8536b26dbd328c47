// iperf3 between network namespaces a test made: a server it stops by PID, and bounded client
// runs (-t 2, JSON) that answer the rate the receiving side measured.
import { spawn, execFileSync, type ChildProcess } from 'node:child_process';

export interface Iperf {
  /** Starts `iperf3 -s` on `port` in netns `ns`; resolves once it listens. */
  serve(ns: string, port: number): Promise<void>;
  /** bit/s received in a 2 s TCP run from `ns` to host:port; reverse: the server sends. */
  rate(ns: string, host: string, port: number, reverse?: boolean): number;
  /** Stops the servers it started. */
  close(): void;
}

export function iperf(): Iperf {
  const servers: ChildProcess[] = [];
  return {
    serve(ns, port) {
      const child = spawn('ip', ['netns', 'exec', ns, 'iperf3', '-s', '--forceflush', '-p', String(port)], { stdio: ['ignore', 'pipe', 'inherit'] });
      servers.push(child);
      return new Promise((resolve, reject) => {
        child.stdout!.once('data', () => resolve());
        child.once('exit', (code) => reject(new Error(`iperf3 server in ${ns} exited ${code}`)));
      });
    },
    rate(ns, host, port, reverse = false) {
      const args = ['netns', 'exec', ns, 'iperf3', '-c', host, '-p', String(port), '-t', '2', '-J', ...(reverse ? ['-R'] : [])];
      const out = JSON.parse(execFileSync('ip', args, { encoding: 'utf8', timeout: 30_000 }));
      if (out.error) throw new Error(`iperf3 from ${ns} to ${host}: ${out.error}`);
      return out.end.sum_received.bits_per_second as number;
    },
    close() {
      for (const s of servers) if (s.exitCode === null && s.signalCode === null) s.kill('SIGKILL');
    },
  };
}
