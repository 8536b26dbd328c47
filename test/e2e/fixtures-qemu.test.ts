// Proves the QEMU fixture on its own (no knit), with the Kata-style plumbing built by `ip`/`tc`:
// host veth <-> pod netns veth <-tc mirred-> tap <-> virtio-net guest. Two boots (TCG is slow):
// the tap by name, then by an inherited fd; plus a launch-only check of handing this process's
// fds to QEMU. Names: kfx2-*, kfx3-*, kfx5-*; addresses 10.213.42.0/24 and
// 10.213.43.0/24 (used only here).
import test from 'ava';
import { closeSync, existsSync, mkdtempSync, openSync, readFileSync, readlinkSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Cleanup } from '../fixtures/cleanup.js';
import { must, run } from '../fixtures/exec.js';
import * as net from '../fixtures/net.js';
import { processAlive } from '../fixtures/proc.js';
import { bootGuest, ensureGuestImage, GUEST_HTTP_PORT, type BootOptions } from '../fixtures/qemu.js';

interface Plumbing {
  nsPath: string;
  hostEnd: string;
  tap: string;
  hostIp: string;
  guestIp: string;
}

/** netns + veth (host end addressed) + tap mirrored to the pod end, removed on teardown. */
async function plumb(cleanup: Cleanup, prefix: string, subnet: string): Promise<Plumbing> {
  const ns = `${prefix}-ns`;
  const p = { hostEnd: `${prefix}-h`, tap: `${prefix}-tap`, hostIp: `${subnet}.1`, guestIp: `${subnet}.2` };
  await net.deleteLink(p.hostEnd);
  const nsPath = await net.createNetns(ns);
  cleanup.defer(`delete netns ${ns}`, () => net.deleteNetns(ns));
  cleanup.defer(`delete link ${p.hostEnd}`, () => net.deleteLink(p.hostEnd));
  await net.vethIntoNetns({ hostEnd: p.hostEnd, hostCidr: `${p.hostIp}/24`, ns, nsEnd: `${prefix}-p` });
  await net.tapMirroredToVeth({ ns, veth: `${prefix}-p`, tap: p.tap });
  return { nsPath, ...p };
}

/** The guest is configured once it prints KNIT-READY; allow a few lost first packets. */
async function hostPings(addr: string): Promise<boolean> {
  for (let i = 0; i < 5; i++) if (await net.pingOnce(addr)) return true;
  return false;
}

async function neighbourMac(dev: string, addr: string): Promise<string | undefined> {
  const r = await run('ip', ['-j', 'neigh', 'show', 'dev', dev, 'to', addr]);
  return (JSON.parse(r.stdout || '[]') as { lladdr?: string }[])[0]?.lladdr;
}

test.serial('qemu fixture: guest on a tap opened by name answers the host, pings it back, serves HTTP', async (t) => {
  const cleanup = new Cleanup();
  t.teardown(() => cleanup.run());
  const p = await plumb(cleanup, 'kfx2', '10.213.42');
  const mac = '52:54:00:13:42:02';
  const started = Date.now();
  const guest = await bootGuest({
    name: 'kfx2',
    netnsPath: p.nsPath,
    tap: { ifname: p.tap },
    mac,
    net: { ip: `${p.guestIp}/24`, gw: p.hostIp, mtu: 1400, ping: [p.hostIp] },
  });
  cleanup.defer('stop guest kfx2', () => guest.stop());

  await guest.waitFor(/KNIT-READY/);
  t.log(`launch to KNIT-READY: ${Date.now() - started} ms`);
  t.regex(guest.serial(), new RegExp(`KNIT-LINK eth0 mac=${mac} mtu=1400`));
  t.notRegex(guest.serial(), /KNIT-ERROR/);
  t.true(await hostPings(p.guestIp), `host could not ping guest ${p.guestIp}`);
  t.log(`launch to first host->guest ping reply: ${Date.now() - started} ms`);
  // Independent observer: the host resolved the guest's address to the guest NIC's MAC.
  t.is(await neighbourMac(p.hostEnd, p.guestIp), mac);

  const [, verdict] = (await guest.waitFor(/KNIT-PING-(OK|FAIL) /)) as RegExpMatchArray;
  t.is(verdict, 'OK', `guest could not ping ${p.hostIp}`);
  const res = await fetch(`http://${p.guestIp}:${GUEST_HTTP_PORT}/`);
  t.is((await res.text()).trim(), `knit-guest ${p.guestIp}`);

  const pid = guest.pid;
  await guest.stop();
  t.false(processAlive(pid), `QEMU ${pid} still running after stop()`);
  t.false(existsSync(guest.serialLog));
});

test.serial('qemu fixture: guest given its tap as an inherited fd answers the host', async (t) => {
  const cleanup = new Cleanup();
  t.teardown(() => cleanup.run());
  const p = await plumb(cleanup, 'kfx3', '10.213.43');
  const mac = '52:54:00:13:43:02';
  const started = Date.now();
  const guest = await bootGuest({
    name: 'kfx3',
    netnsPath: p.nsPath,
    tap: { openWithHelper: p.tap },
    mac,
    net: { ip: `${p.guestIp}/24`, gw: p.hostIp },
  });
  cleanup.defer('stop guest kfx3', () => guest.stop());

  await guest.waitFor(/KNIT-READY/);
  t.log(`launch to KNIT-READY: ${Date.now() - started} ms`);
  // QEMU holds the tap as fd 3 (the kernel names the attached interface in fdinfo) and was
  // not told any ifname.
  t.is(readlinkSync(`/proc/${guest.pid}/fd/3`), '/dev/net/tun');
  t.regex(readFileSync(`/proc/${guest.pid}/fdinfo/3`, 'utf8'), new RegExp(`iff:\\s*${p.tap}\\b`));
  const argv = readFileSync(`/proc/${guest.pid}/cmdline`, 'utf8').split('\0');
  t.true(argv.includes('tap,id=n0,fd=3,vhost=off'), argv.join(' '));
  t.false(argv.some((a) => a.includes('ifname=')));
  t.true(await hostPings(p.guestIp), `host could not ping guest ${p.guestIp}`);
  t.log(`launch to first host->guest ping reply: ${Date.now() - started} ms`);
  t.is(await neighbourMac(p.hostEnd, p.guestIp), mac);
});

test.serial('qemu fixture: tap fds of this process reach QEMU as fd 3 via spawn stdio (macvtap; launch only, no boot wait)', async (t) => {
  // Node cannot TUNSETIFF, but it can open a macvtap's character device: a real tap fd that
  // exercises the same hand-off knit's addon fds will take.
  const cleanup = new Cleanup();
  t.teardown(() => cleanup.run());
  const ns = 'kfx5-ns';
  const nsPath = await net.createNetns(ns);
  cleanup.defer(`delete netns ${ns}`, () => net.deleteNetns(ns));
  await net.ip('-n', ns, 'link', 'add', 'kfx5-a', 'type', 'veth', 'peer', 'name', 'kfx5-b');
  await net.ip('-n', ns, 'link', 'add', 'link', 'kfx5-a', 'name', 'kfx5-mvt', 'type', 'macvtap', 'mode', 'bridge');
  for (const l of ['kfx5-a', 'kfx5-b', 'kfx5-mvt']) await net.ip('-n', ns, 'link', 'set', l, 'up');
  // /dev/tapN is named by an ifindex of another netns; make our own node from its dev numbers.
  const devNumbers = (await must('ip', ['netns', 'exec', ns, 'sh', '-c', 'cat /sys/class/net/kfx5-mvt/macvtap/*/dev'])).trim();
  const [major, minor] = devNumbers.split(':');
  const dir = mkdtempSync(path.join(os.tmpdir(), 'kfx5-'));
  cleanup.defer(`remove ${dir}`, () => rmSync(dir, { recursive: true, force: true }));
  const node = path.join(dir, 'tap');
  await must('mknod', [node, 'c', major, minor]);
  const fd = openSync(node, 'r+');
  cleanup.defer('close tap fd', () => closeSync(fd));

  const mac = (await must('ip', ['-n', ns, '-j', 'link', 'show', 'kfx5-mvt']).then((o) => JSON.parse(o)[0].address)) as string;
  const guest = await bootGuest({ name: 'kfx5', netnsPath: nsPath, tap: { fds: [fd] }, mac, extraCmdline: ['loglevel=7', 'earlyprintk=ttyS0'] });
  cleanup.defer('stop guest kfx5', () => guest.stop());
  // The kernel's first console line means QEMU accepted the netdev and started the machine.
  await guest.waitFor(/Linux version/);
  t.is(readlinkSync(`/proc/${guest.pid}/fd/3`), node);
  t.true(readFileSync(`/proc/${guest.pid}/cmdline`, 'utf8').split('\0').includes('tap,id=n0,fd=3,vhost=off'));
  await guest.stop();
  t.false(processAlive(guest.pid));
});

test('qemu fixture: bad boot options are rejected naming the field, before anything starts', async (t) => {
  const base: BootOptions = { netnsPath: '/proc/self/ns/net', tap: { ifname: 'kfx4-tap' }, mac: '52:54:00:13:44:02' };
  await t.throwsAsync(bootGuest({ ...base, mac: '52:54:00:13:44' }), { message: /bootGuest: mac/ });
  await t.throwsAsync(bootGuest({ ...base, netnsPath: '/run/netns/kfx4-missing' }), { message: /bootGuest: netnsPath/ });
  await t.throwsAsync(bootGuest({ ...base, tap: { fds: [] } }), { message: /bootGuest: tap.fds/ });
  await t.throwsAsync(bootGuest({ ...base, tap: { ifname: 'a-name-longer-than-15' } }), { message: /bootGuest: tap.ifname/ });
  await t.throwsAsync(bootGuest({ ...base, net: { ip: '10.0.0.2/24 init=/bin/sh' } }), { message: /bootGuest: net.ip/ });
});

test('qemu fixture: the guest image is a Debian kernel and a gzip initramfs', async (t) => {
  const a = await ensureGuestImage();
  t.regex(a.kernelPackage.name, /^linux-image-\S+-amd64$/);
  const file = await run('file', ['-b', a.kernel, a.initrd]);
  t.regex(file.stdout, /Linux kernel x86 boot executable/);
  t.regex(file.stdout, /gzip compressed data/);
});
