// AddInterface / RemoveInterface / Plan{add_interface} requests: the domain objects core gets,
// and INVALID_ARGUMENT naming the field the caller sent; and `knit attach-if`, `detach-if` and
// `plan --add-if` as a user runs them (a real process against the api layer with an in-memory
// service, as cli.test.ts).
import test from 'ava';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { KnitError } from '../../src/base/errors.js';
import { validateAddInterface, validateAttach, validateRemoveInterface } from '../../src/api/validate.js';
import { startApiServer } from '../../src/api/server.js';
import { MemorySandboxService } from './api-memory-service.js';
import { tempSocketDir } from './api-grpc-call.js';

test('AddInterface maps onto the domain; default_route is carried', (t) => {
  t.deepEqual(validateAddInterface({ sandbox_id: 'sb', interface: { name: 'net1', network: 'blue', binding: { mode: 'tcfilter' } } }), {
    sandboxId: 'sb', iface: { name: 'net1', network: 'blue', binding: { mode: 'tcfilter' } },
  });
  t.deepEqual(validateAttach({ sandbox_id: 'sb', netns_path: '/run/netns/x', interfaces: [{ name: 'eth0' }, { name: 'net1', default_route: true }] } as never).interfaces, [
    { name: 'eth0' }, { name: 'net1', defaultRoute: true },
  ]);
});

const refusals: { what: string; run: () => unknown; field: string }[] = [
  { what: 'add: no interface name', run: () => validateAddInterface({ sandbox_id: 'sb', interface: { network: 'blue' } }), field: 'interface.name' },
  { what: 'add: no interface at all', run: () => validateAddInterface({ sandbox_id: 'sb' }), field: 'interface.name' },
  { what: 'add: bad MAC', run: () => validateAddInterface({ sandbox_id: 'sb', interface: { name: 'net1', mac: 'zz' } }), field: 'interface.mac' },
  { what: 'add: no sandbox', run: () => validateAddInterface({ interface: { name: 'net1' } }), field: 'sandbox_id' },
  { what: 'plan add: prefix', run: () => validateAddInterface({ sandbox_id: 'sb', interface: { name: 'a/b' } }, { prefix: 'add_interface.' }), field: 'add_interface.interface.name' },
  { what: 'remove: no name', run: () => validateRemoveInterface({ sandbox_id: 'sb' }), field: 'name' },
  { what: 'remove: name too long', run: () => validateRemoveInterface({ sandbox_id: 'sb', name: 'x'.repeat(16) }), field: 'name' },
  {
    what: 'attach: two default routes',
    run: () => validateAttach({ sandbox_id: 'sb', netns_path: '/run/netns/x', interfaces: [{ name: 'eth0', default_route: true }, { name: 'net1', default_route: true }] } as never),
    field: 'interfaces[1].default_route',
  },
];
for (const c of refusals) {
  test(`refused: ${c.what}`, (t) => {
    const err = t.throws(c.run, { instanceOf: KnitError });
    t.is(err?.code, 'INVALID_ARGUMENT');
    t.is(err?.details.field, c.field);
    t.true(err!.message.startsWith(`${c.field}: `), err!.message);
  });
}

function knit(args: string[], socketPath: string): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, ['bin/knit', ...args, '--socket', socketPath], { timeout: 60_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout, stderr });
    });
  });
}

test('knit attach-if, plan --add-if and detach-if reach the service as one validated request each', async (t) => {
  const socketPath = path.join(tempSocketDir(t, 'khp-'), 'knit.sock');
  const service = new MemorySandboxService();
  const server = await startApiServer({ socketPath, service });
  t.teardown(() => server.close(100));
  t.is((await knit(['attach', '--id', 'hp', '--netns', '/run/netns/hp'], socketPath)).code, 0);

  const plan = await knit(['plan', '--id', 'hp', '--add-if', 'net1,network=blue', '--json'], socketPath);
  t.is(plan.code, 0, plan.stderr);
  t.regex(JSON.parse(plan.stdout).steps[0].description, /create veth net1/);

  const added = await knit(['attach-if', '--id', 'hp', '--if', 'net1,network=blue,mtu=1400', '--json'], socketPath);
  t.is(added.code, 0, added.stderr);
  t.true(JSON.parse(added.stdout).interfaces.some((i: { name: string }) => i.name === 'net1'));
  t.deepEqual(service.records.get('hp')!.request.interfaces.at(-1), { name: 'net1', network: 'blue', mtu: 1400 });

  const twice = await knit(['attach-if', '--id', 'hp', '--if', 'net1', '--if', 'net2'], socketPath);
  t.is(twice.code, 1, 'one interface per attach-if');
  const bad = await knit(['attach-if', '--id', 'hp', '--if', 'net1,mac=zz'], socketPath);
  t.is(bad.code, 3);
  t.regex(bad.stderr, /interface\.mac/);

  const removed = await knit(['detach-if', 'hp', 'net1'], socketPath);
  t.is(removed.code, 0, removed.stderr);
  t.is(removed.stdout.trim(), 'removed net1 from hp');
  t.false(service.records.get('hp')!.request.interfaces.some((i) => i.name === 'net1'));
});
