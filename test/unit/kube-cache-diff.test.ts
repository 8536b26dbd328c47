// The informer's relist diff: the adds, updates and deletes a lost watch would have delivered,
// from the cached view and a fresh list.
import test from 'ava';
import { diffRelist, objectKey } from '../../src/kube/cache-diff.js';

type Obj = { metadata: { name: string; namespace?: string; resourceVersion?: string; uid?: string }; spec?: unknown };
const o = (name: string, rv: string, uid = `uid-${name}`, namespace?: string): Obj => ({ metadata: { name, namespace, resourceVersion: rv, uid } });
const cacheOf = (objs: Obj[]) => new Map(objs.map((x) => [objectKey(x), x]));

test('keys: "namespace/name", or the name alone for a cluster-scoped object', (t) => {
  t.is(objectKey(o('n1', '1')), 'n1');
  t.is(objectKey(o('claim', '1', 'u', 'ns')), 'ns/claim');
});

test('added, updated (new resourceVersion), deleted; unchanged objects are not reported', (t) => {
  const kept = o('kept', '5');
  const before = [kept, o('changed', '6'), o('gone', '7')];
  const after = [o('kept', '5'), o('changed', '9'), o('new', '10')];
  const d = diffRelist(cacheOf(before), after);
  t.deepEqual(d.added.map((x) => x.metadata.name), ['new']);
  t.deepEqual(d.updated.map((u) => [u.old.metadata.resourceVersion, u.obj.metadata.resourceVersion]), [['6', '9']]);
  t.deepEqual(d.deleted.map((x) => x.metadata.name), ['gone']);
});

test('deleted and made again under the same name (a new uid): a delete and an add', (t) => {
  const d = diffRelist(cacheOf([o('n1', '3', 'old-uid')]), [o('n1', '8', 'new-uid')]);
  t.deepEqual(d.deleted.map((x) => x.metadata.uid), ['old-uid']);
  t.deepEqual(d.added.map((x) => x.metadata.uid), ['new-uid']);
  t.deepEqual(d.updated, []);
});

test('namespaces keep same-named objects apart', (t) => {
  const d = diffRelist(cacheOf([o('c', '1', 'a', 'ns1')]), [o('c', '1', 'a', 'ns1'), o('c', '2', 'b', 'ns2')]);
  t.deepEqual(d.added.map(objectKey), ['ns2/c']);
  t.deepEqual(d.deleted, []);
  t.deepEqual(d.updated, []);
});

test('an empty cache (the first list) is all adds; an empty list is all deletes', (t) => {
  const objs = [o('a', '1'), o('b', '2')];
  t.deepEqual(diffRelist(new Map(), objs), { added: objs, updated: [], deleted: [] });
  t.deepEqual(diffRelist(cacheOf(objs), []), { added: [], updated: [], deleted: objs });
});

test('byContent: the same resourceVersion with other content is an update (a copy pruned by a CRD\'s old schema); without it, not', (t) => {
  const pruned = { ...o('egress-tcp', '7'), spec: { egress: [{ protocols: [{}] }] } };
  const whole = { ...o('egress-tcp', '7'), spec: { egress: [{ protocols: [{ destinationNamedPort: 'web' }] }] } };
  t.deepEqual(diffRelist(cacheOf([pruned]), [whole]).updated, []);
  t.deepEqual(diffRelist(cacheOf([pruned]), [whole], true).updated, [{ obj: whole, old: pruned }]);
  t.deepEqual(diffRelist(cacheOf([whole]), [{ ...whole }], true).updated, [], 'the same content is no update');
});
