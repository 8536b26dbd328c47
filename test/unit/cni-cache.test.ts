// libcni's result cache as knit writes it, on tmpfs (/dev/shm) and on the temp dir's filesystem
// (a disk here): the same files either way, the results directory made when a write finds it
// missing, no temporary file left behind.
import test from 'ava';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { cacheFile, readCache, removeCache, resultsDir, writeCache, type CachedAttachment } from '../../src/cni-exec/cache.js';
import { onTmpfs } from '../../src/store/atomic.js';
import { uniquePrefix } from '../helpers/names.js';

const entry = (containerId: string): CachedAttachment => ({
  kind: 'cniCacheV1', containerId, config: Buffer.from('{"name":"pods"}').toString('base64'), ifName: 'eth0', networkName: 'pods',
  netns: '/run/netns/x', cniArgs: [['K8S_POD_NAME', 'p']], capabilityArgs: {}, result: { cniVersion: '1.0.0', ips: [{ address: '10.1.0.2/24' }] },
});

for (const [kind, root] of [['tmpfs', '/dev/shm'], ['temp dir', os.tmpdir()]] as const) {
  test(`cache on the ${kind} (${onTmpfs(root) ? 'tmpfs' : 'not tmpfs'}): written whole, read back, removed; results/ made again when it went missing`, (t) => {
    const base = mkdtempSync(path.join(root, uniquePrefix('cch')));
    t.teardown(() => rmSync(base, { recursive: true, force: true }));
    const cacheDir = path.join(base, 'cni'); // not there yet: the first write makes it
    const key = { network: 'pods', containerId: 'c1', ifName: 'eth0' };

    t.is(readCache(cacheDir, key), undefined);
    removeCache(cacheDir, key); // nothing to remove is not an error
    writeCache(cacheDir, entry('c1'));
    t.deepEqual(JSON.parse(readFileSync(cacheFile(cacheDir, key), 'utf8')), entry('c1'));
    t.deepEqual(readCache(cacheDir, key), entry('c1'));
    t.deepEqual(readdirSync(resultsDir(cacheDir)), ['pods-c1-eth0']);

    // Someone removed the results directory after knit first wrote there.
    rmSync(resultsDir(cacheDir), { recursive: true });
    writeCache(cacheDir, entry('c2'));
    t.deepEqual(readdirSync(resultsDir(cacheDir)), ['pods-c2-eth0']);

    // A result larger than one 64 KiB read.
    const big = { ...entry('c3'), result: { cniVersion: '1.0.0', ips: Array.from({ length: 3000 }, (_, i) => ({ address: `10.1.${i >> 8}.${i & 255}/16` })) } };
    writeCache(cacheDir, big);
    t.deepEqual(readCache(cacheDir, { ...key, containerId: 'c3' }), big);
    removeCache(cacheDir, { ...key, containerId: 'c3' });

    removeCache(cacheDir, { ...key, containerId: 'c2' });
    t.deepEqual(readdirSync(resultsDir(cacheDir)), []);
    t.is(readCache(cacheDir, { ...key, containerId: 'c2' }), undefined);

    // A write that a kill -9 cut short (created, not yet written) is no cached result, as in libcni.
    writeFileSync(cacheFile(cacheDir, { ...key, containerId: 'c4' }), '');
    t.is(readCache(cacheDir, { ...key, containerId: 'c4' }), undefined);
    writeFileSync(cacheFile(cacheDir, { ...key, containerId: 'c4' }), '{"kind":"cniCacheV1","contai');
    t.is(readCache(cacheDir, { ...key, containerId: 'c4' }), undefined);
  });
}
