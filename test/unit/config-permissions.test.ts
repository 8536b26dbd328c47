// pathProblem: who besides root and knit's uid could change a path knit trusts. Checked on real
// files in a private temporary directory, with modes set by chmod (no other user needed).
import test from 'ava';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { pathProblem } from '../../src/config/permissions.js';

const uid = process.getuid!();
const gid = process.getgid!();

function scratch(t: { teardown(f: () => void): void }): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'knit-perm-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

test('a 0700 dir and a 0644 file are fine; a dir not made yet is judged by the dirs above it', (t) => {
  const dir = scratch(t);
  writeFileSync(path.join(dir, 'config.json'), '{}', { mode: 0o644 });
  t.is(pathProblem(dir, uid, gid), undefined);
  t.is(pathProblem(path.join(dir, 'config.json'), uid, gid), undefined);
  t.is(pathProblem(path.join(dir, 'not', 'yet'), uid, gid), undefined);
});

test('world-writable: the path itself, or a dir above it without the sticky bit', (t) => {
  const dir = scratch(t);
  const open = path.join(dir, 'open');
  mkdirSync(open);
  chmodSync(open, 0o777);
  t.regex(pathProblem(open, uid, gid) ?? '', /\(mode 0777, .*\) is world-writable$/);
  t.regex(pathProblem(path.join(open, 'run'), uid, gid) ?? '', new RegExp(`^${open} \\(mode 0777`));
  const file = path.join(dir, 'config.json');
  writeFileSync(file, '{}');
  chmodSync(file, 0o666);
  t.regex(pathProblem(file, uid, gid) ?? '', /is world-writable/);
});

test('a sticky world-writable dir above is fine, the path itself being one is not', (t) => {
  const dir = scratch(t);
  const sticky = path.join(dir, 'tmp');
  mkdirSync(sticky);
  chmodSync(sticky, 0o1777);
  t.is(pathProblem(path.join(sticky, 'knit'), uid, gid), undefined);
  t.regex(pathProblem(sticky, uid, gid) ?? '', /is world-writable/);
});

test('group-writable is fine for knit\'s own group', (t) => {
  const dir = scratch(t);
  chmodSync(dir, 0o770);
  t.is(pathProblem(dir, uid, gid), undefined);
  // Another group's case needs chown: test/kernel/daemon-insecure-modes.test.ts.
});

test('a world-writable dir on a read-only mount is fine, as a ConfigMap volume mounted readOnly is (0777, as every emptyDir); the same dir writable is not', (t) => {
  const dir = scratch(t);
  const volume = path.join(dir, 'etc-knit');
  mkdirSync(volume);
  chmodSync(volume, 0o777);
  writeFileSync(path.join(volume, 'config.yaml'), '{}', { mode: 0o644 });
  const permissions = fileURLToPath(new URL('../../src/config/permissions.js', import.meta.url));
  const check = `import(${JSON.stringify(permissions)}).then((m) => console.log(JSON.stringify([m.pathProblem(${JSON.stringify(volume)}), m.pathProblem(${JSON.stringify(path.join(volume, 'config.yaml'))})])))`;
  // A read-only bind mount of it, in a mount namespace of the check's own (nothing reaches the machine's).
  const out = execFileSync('unshare', ['--mount', '--propagation', 'private', 'sh', '-ec', `mount --bind ${volume} ${volume}; mount -o remount,bind,ro ${volume}; exec ${process.execPath} -e '${check}'`], { encoding: 'utf8' });
  t.deepEqual(JSON.parse(out), [null, null], 'read-only: no problem with the dir or the file in it');
  t.regex(pathProblem(volume, uid, gid) ?? '', /\(mode 0777, .*\) is world-writable$/, 'writable: refused');
  t.regex(pathProblem(path.join(volume, 'config.yaml'), uid, gid) ?? '', /etc-knit \(mode 0777/);
});
