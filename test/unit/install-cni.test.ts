// `knit install-cni` / `uninstall-cni` on throwaway dirs: atomic install of shim and conflist,
// never clobbering or removing a file knit did not write.
import test from 'ava';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { run } from '../../src/cli/run.js';

function io() {
  const out: string[] = [];
  const err: string[] = [];
  return { io: { out: (s: string) => out.push(s), err: (s: string) => err.push(s), env: {} }, out, err };
}

function dirs(t: { teardown(f: () => void): void }) {
  const root = mkdtempSync(path.join(os.tmpdir(), 'knit-cinst-'));
  t.teardown(() => rmSync(root, { recursive: true, force: true }));
  // The daemon config names the state dir where install-cni records what it installed.
  const config = path.join(root, 'config.json');
  writeFileSync(config, JSON.stringify({ stateDir: path.join(root, 'state') }));
  return { bin: path.join(root, 'bin'), conf: path.join(root, 'net.d'), config, record: path.join(root, 'state', 'cni-install.json') };
}

test('install-cni writes the shim and a conflist naming the socket; uninstall-cni removes exactly those', async (t) => {
  const d = dirs(t);
  const a = io();
  t.is(await run(['install-cni', '--bin-dir', d.bin, '--conf-dir', d.conf, '--config', d.config, '--network', 'blue', '--socket', '/run/x/cni.sock'], a.io), 0, a.err.join());
  t.true((statSync(path.join(d.bin, 'knit')).mode & 0o111) !== 0);
  const list = JSON.parse(readFileSync(path.join(d.conf, '10-knit.conflist'), 'utf8'));
  t.is(list.cniVersion, '1.0.0');
  t.is(list.plugins[0].type, 'knit');
  t.is(list.plugins[0].network, 'blue');
  t.is(list.plugins[0].socket, '/run/x/cni.sock');
  t.true(list.plugins[0].capabilities['io.kubernetes.cri.pod-annotations']);
  // The daemon's record of the install, which CNI STATUS checks.
  t.deepEqual(JSON.parse(readFileSync(d.record, 'utf8')), { shim: path.join(d.bin, 'knit'), conflist: path.join(d.conf, '10-knit.conflist') });
  // Again (an upgrade): replaces its own files.
  t.is(await run(['install-cni', '--bin-dir', d.bin, '--conf-dir', d.conf, '--config', d.config], io().io), 0);
  writeFileSync(path.join(d.conf, '05-other.conflist'), '{}');
  t.is(await run(['uninstall-cni', '--bin-dir', d.bin, '--conf-dir', d.conf, '--config', d.config], io().io), 0);
  t.deepEqual(readdirSync(d.bin), []);
  t.deepEqual(readdirSync(d.conf), ['05-other.conflist']);
  t.false(existsSync(d.record));
});

test('install-cni refuses to replace a conflist or plugin it did not write, and changes nothing', async (t) => {
  const d = dirs(t);
  t.is(await run(['install-cni', '--bin-dir', d.bin, '--conf-dir', d.conf, '--config', d.config, '--name', '05-other.conflist'], io().io), 0);
  rmSync(path.join(d.bin, 'knit'));
  writeFileSync(path.join(d.conf, '05-other.conflist'), '{"name":"theirs"}');
  writeFileSync(path.join(d.bin, 'knit'), 'not ours');
  const a = io();
  t.not(await run(['install-cni', '--bin-dir', d.bin, '--conf-dir', d.conf, '--config', d.config, '--name', '05-other.conflist'], a.io), 0);
  t.regex(a.err.join(), /not written by knit/);
  t.is(readFileSync(path.join(d.conf, '05-other.conflist'), 'utf8'), '{"name":"theirs"}');
  t.is(readFileSync(path.join(d.bin, 'knit'), 'utf8'), 'not ours');
  t.not(await run(['uninstall-cni', '--bin-dir', d.bin, '--conf-dir', d.conf, '--config', d.config, '--name', '05-other.conflist'], io().io), 0);
  t.is(readFileSync(path.join(d.bin, 'knit'), 'utf8'), 'not ours');
  t.deepEqual(readdirSync(d.conf).sort(), ['05-other.conflist']);
});
