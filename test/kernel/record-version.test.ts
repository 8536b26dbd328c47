// A knit must not start over records a newer knit wrote in a format it cannot read: it refuses
// with a message that says so, touches nothing (the pod keeps its link and traffic), and the
// knit that can read them adopts them afterwards.
import test from 'ava';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import {
  startDaemon, cleanupDaemon, podFactory, runcAttachReq, pingFrom, ipJson, knitLinksFor, eventually, type Daemon,
} from '../helpers/daemon.js';
import { uniquePrefix } from '../helpers/names.js';
import { SANDBOX_RECORD_VERSION } from '../../src/core/record.js';

const NEWER = SANDBOX_RECORD_VERSION + 1;

const P = uniquePrefix('drv');
const opts = { prefix: P, subnet: '10.173.1.0/24' };
const pods = podFactory(P);
let d: Daemon | undefined;

test.after.always(async () => {
  await cleanupDaemon(d, opts, pods.ids);
  pods.removeAll();
});

function setRecordVersion(dir: string, version: number): string {
  const sandboxes = path.join(dir, 'run', 'sandboxes');
  const [file] = readdirSync(sandboxes).filter((f) => !f.startsWith('.'));
  const doc = JSON.parse(readFileSync(path.join(sandboxes, file!), 'utf8'));
  doc.version = version;
  writeFileSync(path.join(sandboxes, file!), JSON.stringify(doc, null, 2));
  return file!;
}

test.serial('a record of a newer format stops an older knit at start-up with a clear message; nothing is touched', async (t) => {
  d = await startDaemon(opts);
  const pod = pods.pod(1);
  const { result } = await d.call('Attach', runcAttachReq(pod.id, pod.path));
  const podIp = (result.ips[0].address as string).split('/')[0]!;
  const gateway = result.ips[0].gateway as string;
  const linksBefore = knitLinksFor(d, [pod.id]).sort();
  await d.stop();

  setRecordVersion(d.dir, NEWER);
  const refused = await d.restart().then(
    () => t.fail(`knit started over a record of format version ${NEWER}`),
    (err: Error) => err.message,
  );
  t.regex(String(refused), new RegExp(`format version ${NEWER}, written by a newer knit; this knit reads format version ${SANDBOX_RECORD_VERSION} at most`));
  t.regex(String(refused), new RegExp(pod.id));
  // Nothing was swept or half-undone: the pod still has its address and reaches its gateway.
  t.deepEqual(knitLinksFor(d, [pod.id]).sort(), linksBefore);
  t.true(ipJson(['addr', 'show', 'eth0'], pod.ns)[0].addr_info.some((a: any) => a.local === podIp));
  t.true(pingFrom(pod.ns, gateway), 'pod reaches its gateway after the refused start');

  // The knit that reads the format (here: the record put back to version 1, what a plan
  // without host ports is written as) adopts and detaches it.
  setRecordVersion(d.dir, 1);
  d = await d.restart();
  const listed = await d.call('List', {});
  t.deepEqual(listed.sandboxes.map((s: any) => s.sandbox_id ?? s.request?.sandbox_id), [pod.id]);
  await d.call('Detach', { sandbox_id: pod.id });
  await eventually(() => knitLinksFor(d!, [pod.id]).every((l) => l === d!.bridge), 'host end of the pod removed');
  t.deepEqual(ipJson(['link', 'show'], pod.ns).map((l: any) => l.ifname), ['lo']);
});
