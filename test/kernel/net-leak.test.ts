// 10,000 veth create/delete cycles through one handle, in a child process (ava runs test files
// as threads of one process, so only a child's /proc/self/fd is ours alone): no fd may be
// left over and RSS must stay bounded. The cycles cover the leak-prone paths: a peer made in
// another netns (netns fd opened and closed per request), aliases (a temporary socket inside
// the peer's netns), failing requests, encode, handles dropped without close() (closed by
// the garbage collector), and one-shot batches in another netns (Handle.runIn).
import test from 'ava';
import { spawnSync } from 'node:child_process';
import { addonPath } from '../../src/net/native.js';
import { linkNames } from '../helpers/observe.js';
import { makeNetns, uniquePrefix } from '../helpers/names.js';

const CYCLES = 10_000;
const PER_BATCH = 100;

function childScript(a: string, b: string, p: string): string {
  return `
    const { Handle } = require(${JSON.stringify(addonPath())});
    const fs = require('fs');
    const fds = () => fs.readdirSync('/proc/self/fd').length;
    const threads = () => fs.readdirSync('/proc/self/task').length;
    const settle = () => { for (let i = 0; i < 5; i++) global.gc(); };
    const h = new Handle(${JSON.stringify(a)});
    let made = 0, failures = 0;
    async function round() {
      const ops = [];
      for (let i = 0; i < ${PER_BATCH}; i++)
        ops.push({ op: 'link.add', kind: 'veth', name: '${p}' + i, group: 4242, alias: 'knit:leak',
                   peer: { name: '${p}p' + i, netns: ${JSON.stringify(b)}, alias: 'knit:leak-peer' } });
      made += (await h.run(ops)).length;
      try { h.runSync([{ op: 'link.add', kind: 'bridge', name: '${p}0' }]); } catch (e) { if (e.code === 'EEXIST') failures++; }
      try { await h.run([{ op: 'link.del', link: '${p}none' }]); } catch (e) { if (e.code === 'ENODEV') failures++; }
      h.encode({ op: 'link.set', link: '${p}1', netns: ${JSON.stringify(b)} });
      h.runSync([{ op: 'link.get', link: '${p}1' }]);
      new Handle(${JSON.stringify(b)}).runSync([{ op: 'link.list' }]);  // dropped, never closed
      await Handle.runIn(${JSON.stringify(b)}, [{ op: 'link.list' }]);  // one batch, no handle
      try { await Handle.runIn(${JSON.stringify(b)}, [{ op: 'link.del', link: '${p}none' }]); } catch (e) { if (e.code === 'ENODEV') failures++; }
      await h.run([{ op: 'link.delGroup', group: 4242 }]);
    }
    (async () => {
      await round();
      settle();
      await new Promise((r) => setTimeout(r, 100));
      settle();
      const before = { fds: fds(), threads: threads(), rss: process.memoryUsage().rss };
      for (let done = ${PER_BATCH}; done < ${CYCLES}; done += ${PER_BATCH}) await round();
      settle();
      await new Promise((r) => setTimeout(r, 100));
      settle();
      const after = { fds: fds(), threads: threads(), rss: process.memoryUsage().rss };
      h.close();
      console.log(JSON.stringify({ made, failures, before, after }));
    })().catch((e) => { console.error(e); process.exit(1); });`;
}

test('10,000 veth create/delete cycles leave fds exactly as they were and RSS bounded', (t) => {
  t.timeout(15 * 60_000);
  const p = uniquePrefix('knk');
  const a = makeNetns(t, p, 'a');
  const b = makeNetns(t, p, 'b');
  const r = spawnSync(process.execPath, ['--expose-gc', '-e', childScript(a.path, b.path, p)], { encoding: 'utf8', timeout: 14 * 60_000 });
  t.is(r.status, 0, r.stderr);
  const out = JSON.parse(r.stdout.trim().split('\n').pop()!);
  t.log(`fds ${out.before.fds} -> ${out.after.fds}; threads ${out.before.threads} -> ${out.after.threads}; RSS ${(out.before.rss / 2 ** 20).toFixed(1)} -> ${(out.after.rss / 2 ** 20).toFixed(1)} MiB`);
  t.is(out.made, CYCLES);
  t.is(out.failures, (3 * CYCLES) / PER_BATCH, 'every deliberate failure failed as expected');
  t.is(out.after.fds, out.before.fds, 'no fd left open');
  // Netns workers (native/src/ns_thread.cc) are kept, at most 4 idle; none may pile up.
  t.true(out.after.threads <= out.before.threads + 4, `threads ${out.before.threads} -> ${out.after.threads}`);
  t.true(out.after.rss < out.before.rss + 64 * 2 ** 20, 'RSS grew by less than 64 MiB');
  t.deepEqual(linkNames(a.name), ['lo']);
  t.deepEqual(linkNames(b.name), ['lo']);
});
