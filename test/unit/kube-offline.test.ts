// The client and the informer with no apiserver at all (a port nobody listens on): failures name
// the call, the informer reports "unreachable" with that detail, keeps retrying, and stops at
// once. Importing the module starts nothing. No stand-in server: what talks to a real kube-apiserver is in test/e2e/kube-client.test.ts.
import test from 'ava';
import { spawnSync } from 'node:child_process';
import { createServer } from 'node:net';
import { pathToFileURL } from 'node:url';
import { KubeApiError, KubeClient } from '../../src/kube/client.js';
import { Informer, type InformerState } from '../../src/kube/informer.js';

/** A loopback port that was free a moment ago: connecting to it is refused. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as { port: number };
  await new Promise((r) => server.close(r));
  return port;
}

test('a refused connection is a status-0 KubeApiError naming the call', async (t) => {
  const port = await closedPort();
  const client = new KubeClient({ server: `https://127.0.0.1:${port}`, source: 'test', token: () => 't' });
  t.teardown(() => client.close());
  const err = await t.throwsAsync(client.get('/api/v1/nodes/n1'), { instanceOf: KubeApiError });
  t.is(err?.status, 0);
  t.is(err?.reason, 'ECONNREFUSED');
  t.is(err?.code, 'UNAVAILABLE');
  t.is(err?.message, `GET https://127.0.0.1:${port}/api/v1/nodes/n1: connect ECONNREFUSED 127.0.0.1:${port}`);
  const listErr = await t.throwsAsync(client.list('/api/v1/nodes', { labelSelector: 'a=b' }));
  t.is(listErr?.message, `GET https://127.0.0.1:${port}/api/v1/nodes: connect ECONNREFUSED 127.0.0.1:${port}`);
});

test('a watch that cannot connect rejects; one whose signal is aborted resolves', async (t) => {
  const port = await closedPort();
  const client = new KubeClient({ server: `http://127.0.0.1:${port}`, source: 'test' });
  t.teardown(() => client.close());
  await t.throwsAsync(client.watch('/api/v1/nodes', { resourceVersion: '1' }, () => {}, new AbortController().signal), { message: /ECONNREFUSED/ });
  const aborted = new AbortController();
  aborted.abort();
  await t.notThrowsAsync(client.watch('/api/v1/nodes', { resourceVersion: '1' }, () => {}, aborted.signal));
  await t.throwsAsync(client.get('/api/v1/nodes', { signal: aborted.signal }), { name: 'AbortError' });
});

test('arguments the API would refuse are refused before a call: apply without fieldManager, force without apply, a relative path', (t) => {
  const client = new KubeClient({ server: 'https://127.0.0.1:1', source: 'test' });
  t.teardown(() => client.close());
  t.throws(() => client.patch('/api/v1/nodes/n1', {}, 'apply'), { message: 'PATCH /api/v1/nodes/n1: server-side apply needs a fieldManager' });
  t.throws(() => client.patch('/api/v1/nodes/n1', {}, 'merge', { force: true }), { message: 'PATCH /api/v1/nodes/n1: force is for server-side apply only' });
  t.throws(() => client.patch('/api/v1/nodes/n1', {}, 'yaml' as never), { message: 'patch type "yaml": not merge, json, strategic or apply' });
  return t.throwsAsync(client.get('api/v1/nodes'), { message: 'API path "api/v1/nodes": must start with /' });
});

test('an informer with no apiserver: "unreachable" with the failing call, an empty view, retries, a prompt stop', async (t) => {
  const port = await closedPort();
  const client = new KubeClient({ server: `https://127.0.0.1:${port}`, source: 'test' });
  t.teardown(() => client.close());
  const informer = new Informer(client, '/api/v1/nodes', { backoff: { initialMs: 5, maxMs: 20 } });
  const states: [InformerState, string][] = [];
  informer.onState((s, detail) => states.push([s, detail]));
  t.is(informer.state, 'starting');
  informer.start();
  const waiting = new AbortController();
  const synced = informer.waitSynced(waiting.signal);
  while (states.length === 0) await new Promise((r) => setTimeout(r, 5));
  t.deepEqual(states, [['unreachable', `GET https://127.0.0.1:${port}/api/v1/nodes: connect ECONNREFUSED 127.0.0.1:${port}`]]);
  t.is(informer.state, 'unreachable');
  t.deepEqual(informer.list(), []);
  await new Promise((r) => setTimeout(r, 100)); // it keeps trying; a transition is reported once
  t.is(states.length, 1);
  waiting.abort();
  await t.throwsAsync(synced, { name: 'AbortError' });
  const stopping = Date.now();
  await informer.stop();
  t.true(Date.now() - stopping < 1000, 'stop does not wait out a backoff');
});

test('importing src/kube starts nothing: no timer, socket or file is left open, and the process ends by itself', (t) => {
  const index = pathToFileURL('build/src/kube/index.js').href;
  const probe = `await import(${JSON.stringify(index)});
setImmediate(() => { const open = process.getActiveResourcesInfo().filter((r) => r !== 'Immediate'); if (open.length) { console.error(open.join(',')); process.exitCode = 3; } });`;
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', probe], { encoding: 'utf8', timeout: 20_000 });
  t.is(r.stderr, '');
  t.is(r.status, 0, 'exited by itself, with nothing open');
});
