// A TCP relay between one client and a running apiserver, that a test cuts (connections
// reset, new ones refused) and mends: a network partition for that client alone.
import net from 'node:net';
import { freePort } from '../fixtures/service.js';

/** A TCP relay to the apiserver that can be cut (connections reset, new ones refused) and mended:
 * a network partition between one client and a running apiserver. */
export async function relay(target: URL) {
  const sockets = new Set<net.Socket>();
  let server: net.Server | undefined;
  // Below the ephemeral range: the port stays ours while the relay is cut.
  const port = await freePort();
  const listen = () =>
    new Promise<void>((resolve) => {
      server = net.createServer((client) => {
        const upstream = net.connect(Number(target.port), target.hostname);
        for (const s of [client, upstream]) {
          sockets.add(s);
          s.on('close', () => sockets.delete(s));
          s.on('error', () => {});
        }
        client.pipe(upstream).pipe(client);
        client.on('close', () => upstream.destroy());
        upstream.on('close', () => client.destroy());
      }).listen(port, '127.0.0.1', resolve);
    });
  await listen();
  return {
    server: `https://127.0.0.1:${port}`,
    async cut() {
      const closed = new Promise((r) => server!.close(r));
      for (const s of sockets) s.resetAndDestroy();
      await closed;
    },
    mend: listen,
  };
}
