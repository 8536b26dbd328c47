// A NAD's config as Multus runs it, and which networks a pod gets with which interface names, as
// Multus decides them (its docs' examples: how-to-use.md "Create network attachment
// definition", configuration.md "Namespace Isolation" and clusterNetwork/defaultNetworks).
import test from 'ava';
import { KnitError } from '../../src/base/errors.js';
import { configFromFiles, delegateOf } from '../../src/netattach/definition.js';
import { podNetworks, type SelectionSettings } from '../../src/netattach/pod-networks.js';
import { delegateArgs } from '../../src/cni-frontend/pod-networks.js';

// how-to-use.md, "NetworkAttachmentDefinition with json CNI config" (macvlan-conf-1): no name.
const macvlanConf1 = `{
            "cniVersion": "0.3.0",
            "type": "macvlan",
            "master": "eth1",
            "mode": "bridge",
            "ipam": {
                "type": "host-local",
                "ranges": [
                    [ {
                         "subnet": "10.10.0.0/16",
                         "rangeStart": "10.10.1.20",
                         "rangeEnd": "10.10.3.50",
                         "gateway": "10.10.0.254"
                    } ]
                ]
            }
        }`;

test('a single config runs as a one-plugin list under the definition\'s name when it has none', (t) => {
  const d = delegateOf('default/macvlan-conf-1', 'macvlan-conf-1', macvlanConf1, undefined, '1.0.0');
  t.is(d.kind, 'chain');
  if (d.kind !== 'chain') return;
  const list = JSON.parse(d.conflist);
  t.is(list.name, 'macvlan-conf-1');
  t.is(list.cniVersion, '0.3.0');
  t.is(list.plugins.length, 1);
  t.like(list.plugins[0], { type: 'macvlan', master: 'eth1', mode: 'bridge', name: 'macvlan-conf-1', cniVersion: '0.3.0' });
});

test('a conflist keeps its own name and plugins; cni-args merge into each plugin\'s args.cni over what it has; a missing cniVersion takes the fallback', (t) => {
  const conf = JSON.stringify({ name: 'chain', plugins: [{ type: 'bridge', args: { cni: { keep: 1, over: 'old' } } }, { type: 'tuning' }] });
  const d = delegateOf('ns/x', 'x', conf, { over: 'new', logicNetworkName: 'blue' }, '0.4.0');
  if (d.kind !== 'chain') return t.fail();
  const list = JSON.parse(d.conflist);
  t.is(list.name, 'chain');
  t.is(list.cniVersion, '0.4.0');
  t.deepEqual(list.plugins.map((p: any) => p.args.cni), [{ keep: 1, over: 'new', logicNetworkName: 'blue' }, { over: 'new', logicNetworkName: 'blue' }]);
});

test('a config whose plugin is knit is built in knit\'s process; knit among other plugins is refused', (t) => {
  const d = delegateOf('default/knit-tap-binding', 'knit-tap-binding', '{"cniVersion": "1.0.0", "name": "knit-tap-binding", "type": "knit"}', { logicNetworkName: 'default' }, '1.0.0');
  t.deepEqual(d, { kind: 'knit', conf: { cniVersion: '1.0.0', name: 'knit-tap-binding', type: 'knit', args: { cni: { logicNetworkName: 'default' } } } });
  const err = t.throws(() => delegateOf('a/b', 'b', '{"cniVersion":"1.0.0","name":"b","plugins":[{"type":"knit"},{"type":"tuning"}]}', undefined, '1.0.0'), { instanceOf: KnitError })!;
  t.is(err.code, 'UNIMPLEMENTED');
});

test('a config that is no CNI config is refused naming the definition', (t) => {
  for (const [config, says] of [['{', /is not JSON/], ['[]', /must be a JSON object/], ['{"name":"x"}', /neither a "type"/], ['{"plugins":[{"ipam":{}}]}', /plugins\[0\]\.type/]] as const) {
    const err = t.throws(() => delegateOf('ns/bad', 'bad', config, undefined, '1.0.0'), { instanceOf: KnitError })!;
    t.regex(err.message, /^NetworkAttachmentDefinition ns\/bad spec\.config/);
    t.regex(err.message, says);
  }
});

test('a definition without config stands for the first file of confDir (by file name: .conf, .json, .conflist) whose "name" is its name (how-to-use.md, macvlan-conf-2)', (t) => {
  const files = [
    { file: 'b.conflist', text: '{"name":"macvlan-conf-2","cniVersion":"0.3.0","plugins":[{"type":"bridge"}]}' },
    { file: 'a-macvlan2.conf', text: '{"cniVersion":"0.3.0","type":"macvlan","name":"macvlan-conf-2","master":"eth1"}' },
    { file: 'c.txt', text: '{"name":"macvlan-conf-2"}' },
    { file: '0-broken.conf', text: '{' },
  ];
  t.is(configFromFiles('macvlan-conf-2', files), files[1]!.text);
  t.is(configFromFiles('other', files), undefined);
});

const settings: SelectionSettings = { namespace: 'kube-system', defaultNetworks: [], systemNamespaces: ['kube-system'], namespaceIsolation: false, globalNamespaces: ['default'] };

test('interface names: as asked, else net<position> with the cluster network at 0 and the default networks first', (t) => {
  const s = { ...settings, defaultNetworks: ['sidecar', 'infra/monitor'] };
  const got = podNetworks({ 'k8s.v1.cni.cncf.io/networks': 'a, b@mine, c' }, 'web', 'eth0', s).networks.map((n) => [n.selection.namespace, n.selection.name, n.ifname, n.isDefault]);
  t.deepEqual(got, [['kube-system', 'sidecar', 'net1', true], ['infra', 'monitor', 'net2', true], ['web', 'a', 'net3', false], ['web', 'b', 'mine', false], ['web', 'c', 'net5', false]]);
  // A pod of a system namespace gets no default networks, and its own start at net1.
  t.deepEqual(podNetworks({ 'k8s.v1.cni.cncf.io/networks': 'a' }, 'kube-system', 'eth0', s).networks.map((n) => n.ifname), ['net1']);
  // The default-network annotation (namespace default: multusNamespace).
  t.deepEqual(podNetworks({ 'v1.multus-cni.io/default-network': 'calico' }, 'web', 'eth0', settings).primary, { name: 'calico', namespace: 'kube-system' });
});

test('two networks under one interface name are refused before anything is made', (t) => {
  const err = t.throws(() => podNetworks({ 'k8s.v1.cni.cncf.io/networks': 'a@net2, b' }, 'web', 'eth0', settings), { instanceOf: KnitError })!;
  t.regex(err.message, /\[1\]: interface net2 is also annotations/);
  t.throws(() => podNetworks({ 'k8s.v1.cni.cncf.io/networks': 'a@eth0' }, 'web', 'eth0', settings), { message: /primary interface/ });
});

test('namespace isolation (configuration.md): a pod of development may not name privileged/macvlan-conf, may name its own and the global namespaces\'', (t) => {
  const s = { ...settings, namespaceIsolation: true };
  const err = t.throws(() => podNetworks({ 'k8s.v1.cni.cncf.io/networks': 'privileged/macvlan-conf' }, 'development', 'eth0', s), { instanceOf: KnitError })!;
  t.is(err.code, 'PERMISSION_DENIED');
  t.regex(err.message, /pod in namespace development may not use network privileged\/macvlan-conf/);
  t.is(podNetworks({ 'k8s.v1.cni.cncf.io/networks': 'macvlan-conf, default/foo' }, 'development', 'eth0', s).networks.length, 2);
  // globalNamespaces given: "default" is global only when listed (configuration.md).
  t.throws(() => podNetworks({ 'k8s.v1.cni.cncf.io/networks': 'default/foo' }, 'development', 'eth0', { ...s, globalNamespaces: ['infra'] }), { message: /may not use network default\/foo/ });
  t.is(podNetworks({ 'k8s.v1.cni.cncf.io/networks': 'infra/foo' }, 'development', 'eth0', { ...s, globalNamespaces: ['infra'] }).networks.length, 1);
});

test('a delegate\'s CNI_ARGS as Multus builds them: its five, then the runtime\'s (filling an empty one, else appended), then MAC and IP', (t) => {
  const k8s = new Map([['K8S_POD_NAMESPACE', 'ns'], ['K8S_POD_NAME', 'p'], ['K8S_POD_INFRA_CONTAINER_ID', 'c1']]);
  const args = delegateArgs('IgnoreUnknown=1;K8S_POD_UID=u1;FOO=bar;junk', k8s, { name: 'n', namespace: 'ns', mac: '02:00:00:00:00:01', ips: ['10.0.0.5/24', 'fd00::5'] });
  t.deepEqual(args, [
    ['IgnoreUnknown', 'true'], ['K8S_POD_NAMESPACE', 'ns'], ['K8S_POD_NAME', 'p'], ['K8S_POD_INFRA_CONTAINER_ID', 'c1'], ['K8S_POD_UID', 'u1'],
    ['IgnoreUnknown', '1'], ['FOO', 'bar'], ['MAC', '02:00:00:00:00:01'], ['IP', '10.0.0.5/24,fd00::5'],
  ]);
});
