// knit in an unprivileged container: the runtime mounts /proc/sys read-only (runc's
// readonlyPaths), and knit, which writes the node's network sysctls, remounts it read-write in
// its own mount namespace at start (src/net/proc-sys.ts, called by serve). Here a mount
// namespace of the test's own gets a read-only /proc/sys the way runc makes it; inside it and a
// fresh netns, a write first fails with EROFS, then makeProcSysWritable() remounts, the write
// lands (read back with `sysctl` in the netns, an independent reader), and the machine's own
// /proc/sys mount is as it was.
import test from 'ava';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { makeNetns, uniquePrefix } from '../helpers/names.js';
import { makeProcSysWritable } from '../../src/net/proc-sys.js';

const P = uniquePrefix('kps');
const procSysMount = () => readFileSync('/proc/self/mountinfo', 'utf8').split('\n').filter((l) => l.split(' ')[4] === '/proc/sys');

test('a read-only /proc/sys (as in an unprivileged container) is remounted read-write in knit\'s mount namespace only, and the sysctl write then lands', (t) => {
  const ns = makeNetns(t, P, 'n');
  const before = procSysMount();
  const module = fileURLToPath(new URL('../../src/net/proc-sys.js', import.meta.url));
  const script = `
    const fs = await import('node:fs');
    const key = '/proc/sys/net/ipv4/conf/lo/forwarding';
    const write = () => { try { fs.writeFileSync(key, '1'); return 'ok'; } catch (e) { return e.code; } };
    const first = write();
    const { makeProcSysWritable } = await import(${JSON.stringify(module)});
    const remounted = makeProcSysWritable();
    const again = makeProcSysWritable();
    console.log(JSON.stringify({ first, remounted, again, second: write() }));`;
  // runc's way: a read-only bind of /proc/sys onto itself, nosuid, nodev, noexec.
  const out = execFileSync('unshare', ['--mount', '--propagation', 'private', 'sh', '-ec',
    'mount --bind /proc/sys /proc/sys; mount -o remount,bind,ro,nosuid,nodev,noexec /proc/sys; exec nsenter --net=/run/netns/' + ns.name + ' "$0" --input-type=module -e "$1"',
    process.execPath, script], { encoding: 'utf8' });
  t.deepEqual(JSON.parse(out), { first: 'EROFS', remounted: true, again: false, second: 'ok' }, 'EROFS, remounted once, then the write lands');
  t.is(execFileSync('ip', ['netns', 'exec', ns.name, 'sysctl', '-n', 'net.ipv4.conf.lo.forwarding'], { encoding: 'utf8' }).trim(), '1', 'the netns has it');
  t.deepEqual(procSysMount(), before, 'the machine\'s /proc/sys mount is as it was');
  t.false(makeProcSysWritable(), 'on the machine, where /proc/sys is writable, it changes nothing');
});
