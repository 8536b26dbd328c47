// A ping that runs in the background while a test changes things, and says afterwards how many
// replies it lost: the observer for "nothing talking through here noticed".
import { spawn } from 'node:child_process';

/** `ping -c count -i 0.2` from `ns` (the host when undefined); resolves with the lost replies. */
export function pinger(ns: string | undefined, target: string, count: number): Promise<number> {
  const argv = ['ping', '-n', '-c', String(count), '-i', '0.2', '-W', '2', target];
  const [cmd, ...args] = ns ? ['ip', 'netns', 'exec', ns, ...argv] : argv;
  return new Promise((resolve, reject) => {
    const child = spawn(cmd!, args);
    let out = '';
    child.stdout.on('data', (b) => (out += b));
    child.on('error', reject);
    child.on('close', () => {
      const m = /(\d+) packets transmitted, (\d+) received/.exec(out);
      if (!m) reject(new Error(`ping from ${ns ?? 'the host'} to ${target} printed no summary: ${out}`));
      else resolve(Number(m[1]) - Number(m[2]));
    });
  });
}
