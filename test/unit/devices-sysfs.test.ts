// How knit reads sysfs: an attribute's value whatever its length, and an inventory scan that
// reads a few functions at a time. The DRA driver rescans every 30 s; every read in flight holds
// its promise, request and buffer, and a whole node's functions at once (70 in the bench) held
// about a thousand of them, which V8 then kept in its old space (bench/README.md, "The DRA
// driver: memory and restart").
import test from 'ava';
import { mkdtemp, mkdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { scanInventory } from '../../src/devices/inventory.js';
import { Sysfs } from '../../src/devices/sysfs.js';
import { createFakeSysfs, type FakePciSpec } from '../fixtures/fake-sysfs.js';

test('an attribute reads whole at any length, its trailing newline dropped; a missing one is undefined', async (t) => {
  const root = await mkdtemp(path.join(tmpdir(), 'knit-sysfs-'));
  t.teardown(() => rm(root, { recursive: true, force: true }));
  await mkdir(path.join(root, 'a'));
  const sysfs = new Sysfs(root);
  for (const length of [0, 1, 255, 256, 257, 4095, 4096, 4097, 70_000]) {
    const value = 'x'.repeat(length);
    await writeFile(path.join(root, 'a', 'value'), `${value}\n`);
    t.is(await sysfs.read('a/value'), value, `${length} bytes`);
  }
  await writeFile(path.join(root, 'a', 'n'), '0x1f\n');
  t.is(await sysfs.readInt('a/n'), 31);
  t.is(await sysfs.read('a/absent'), undefined);
  t.is(await sysfs.read('b/absent'), undefined);
});

/** A Sysfs that counts the calls in flight. */
class CountingSysfs extends Sysfs {
  inFlight = 0;
  most = 0;
  calls = 0;

  private async counted<T>(call: () => Promise<T>): Promise<T> {
    this.calls++;
    this.most = Math.max(this.most, ++this.inFlight);
    try {
      return await call();
    } finally {
      this.inFlight--;
    }
  }

  override read(rel: string) { return this.counted(() => super.read(rel)); }
  override readlink(rel: string) { return this.counted(() => super.readlink(rel)); }
  override realpath(rel: string) { return this.counted(() => super.realpath(rel)); }
  override list(rel: string) { return this.counted(() => super.list(rel)); }
  override exists(rel: string) { return this.counted(() => super.exists(rel)); }
}

test('a scan of 70 functions reads a few of them at a time, and finds them all (simulated sysfs)', async (t) => {
  const PF = '0000:3b:00.0';
  const vf = (i: number) => `0000:3b:${(1 + Math.floor(i / 8)).toString(16).padStart(2, '0')}.${i % 8}`;
  const specs: FakePciSpec[] = [
    { bdf: PF, classCode: 0x020000, vendor: 0x15b3, device: 0x1017, driver: 'mlx5_core', iommuGroup: 30, sriovTotalVfs: 128, netdev: { name: 'ens1f0', mac: '0c:42:a1:00:00:00', mtu: 9000, ifindex: 4 } },
    ...Array.from({ length: 69 }, (_, i): FakePciSpec => ({
      bdf: vf(i), classCode: 0x020000, vendor: 0x15b3, device: 0x1018, driver: 'vfio-pci', idTable: ['mlx5_core'], iommuGroup: 100 + i, physfn: { pf: PF, index: i },
    })),
  ];
  const { root } = await createFakeSysfs(t, specs);
  const sysfs = new CountingSysfs(root);
  const inv = await scanInventory(sysfs);
  t.is(inv.devices.length, 70);
  t.deepEqual(inv.devices.filter((d) => d.kind === 'vf').map((d) => d.pciAddress), specs.slice(1).map((s) => s.bdf).sort());
  // Some fifteen calls per function, and the PF's 69 virtfn links in one wave: all of them at
  // once were a thousand in flight.
  t.true(sysfs.calls > 700, `${sysfs.calls} calls`);
  t.true(sysfs.most < 200, `at most ${sysfs.most} in flight`);
});
