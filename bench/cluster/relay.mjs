// The API server listens on the host's loopback, and a node netns has a loopback of its own: a
// relay carries the TLS stream through a unix socket (the file system is shared), 127.0.0.1:port
// in the node netns → the socket → 127.0.0.1:port on the host, as test/e2e/cluster-api.test.ts
// does. Each relay is a child process the caller ends by PID.
import { spawn } from 'node:child_process';

export function relay(port, sock, ns) {
  const code = ns
    ? `const n=require('net');n.createServer((c)=>{const u=n.connect(${JSON.stringify(sock)});c.pipe(u).pipe(c);u.on('error',()=>c.destroy());c.on('error',()=>u.destroy())}).listen(${port},'127.0.0.1',()=>console.log('up'))`
    : `const n=require('net');n.createServer((c)=>{const u=n.connect(${port},'127.0.0.1');c.pipe(u).pipe(c);u.on('error',()=>c.destroy());c.on('error',()=>u.destroy())}).listen(${JSON.stringify(sock)},()=>console.log('up'))`;
  const argv = ns ? ['ip', 'netns', 'exec', ns, process.execPath, '-e', code] : [process.execPath, '-e', code];
  const child = spawn(argv[0], argv.slice(1), { stdio: ['ignore', 'pipe', 'inherit'] });
  const up = new Promise((resolve, reject) => {
    child.stdout.once('data', () => resolve());
    child.once('exit', (c) => reject(new Error(`relay ${ns ?? 'host'} exited ${c}`)));
  });
  return { up, stop: () => child.exitCode === null && child.kill('SIGKILL') };
}
