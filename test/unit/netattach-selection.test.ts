// The networks annotation read as Multus reads it, against the examples of Multus's own docs
// (multus-cni docs/how-to-use.md, docs/configuration.md, docs/quickstart.md) and the annotation
// KubeVirt's virt-controller writes for a VMI (kubevirt pkg/network/multus/annotation.go).
import test from 'ava';
import { KnitError } from '../../src/base/errors.js';
import { isGoMac, parseDefaultNetwork, parseNetworkSelections } from '../../src/netattach/selection.js';

const parse = (text: string, ns = 'default') => parseNetworkSelections(text, ns);

test('text form (how-to-use.md "Launch pod with text annotation"): a comma-separated list, each in the pod\'s namespace', (t) => {
  t.deepEqual(parse('macvlan-conf-1, macvlan-conf-2', 'development'), [
    { name: 'macvlan-conf-1', namespace: 'development' },
    { name: 'macvlan-conf-2', namespace: 'development' },
  ]);
});

test('text form with a namespace ("testns1/macvlan-conf-3") and with an interface ("macvlan-conf-1@macvlan1")', (t) => {
  t.deepEqual(parse('testns1/macvlan-conf-3'), [{ name: 'macvlan-conf-3', namespace: 'testns1' }]);
  t.deepEqual(parse('macvlan-conf-1@macvlan1'), [{ name: 'macvlan-conf-1', namespace: 'default', interface: 'macvlan1' }]);
  t.deepEqual(parse('privileged/macvlan-conf'), [{ name: 'macvlan-conf', namespace: 'privileged' }]); // configuration.md, namespace isolation
  t.deepEqual(parse('macvlan-conf,macvlan-conf'), [{ name: 'macvlan-conf', namespace: 'default' }, { name: 'macvlan-conf', namespace: 'default' }]); // quickstart.md: one NAD twice
  t.deepEqual(parse(' ns1/blue @ net7 , red'), [{ name: 'blue', namespace: 'ns1', interface: 'net7' }, { name: 'red', namespace: 'default' }]);
});

test('JSON form (how-to-use.md "Launch pod with json annotation"), with namespace and with interface', (t) => {
  t.deepEqual(parse(`[
            { "name" : "macvlan-conf-1" },
            { "name" : "macvlan-conf-2" }
    ]`), [{ name: 'macvlan-conf-1', namespace: 'default' }, { name: 'macvlan-conf-2', namespace: 'default' }]);
  t.deepEqual(parse(`[
            { "name" : "macvlan-conf-1",
              "namespace": "testns1" }
    ]`), [{ name: 'macvlan-conf-1', namespace: 'testns1' }]);
  t.deepEqual(parse(`[
            { "name" : "macvlan-conf-1",
              "interface": "macvlan1" },
            { "name" : "macvlan-conf-2" }
    ]`), [{ name: 'macvlan-conf-1', namespace: 'default', interface: 'macvlan1' }, { name: 'macvlan-conf-2', namespace: 'default' }]);
});

test('JSON form with default-route (how-to-use.md "Specifying a default route for a specific attachment")', (t) => {
  t.deepEqual(parse(`[{
      "name": "macvlan-conf",
      "default-route": ["192.168.2.1"]
    }]`), [{ name: 'macvlan-conf', namespace: 'default', defaultRoute: ['192.168.2.1'] }]);
});

test('every field of the JSON form, with Go\'s case-insensitive keys and the pre-3.2 "interfaceRequest"', (t) => {
  const [n] = parse(JSON.stringify([{
    name: 'sriov', namespace: 'net', ips: ['10.1.1.5/24', 'fd00::5'], mac: 'c2:b0:57:49:47:f1', 'infiniband-guid': '00:00:00:00:00:00:00:01',
    interface: 'sr0', portMappings: [{ hostPort: 8080, containerPort: 80, protocol: 'tcp', hostIP: '10.0.0.1' }],
    bandwidth: { ingressRate: 1000, ingressBurst: 2000, egressRate: 3000, egressBurst: 4000 }, deviceID: '0000:3b:02.0',
    'cni-args': { foo: 'bar', n: 1 }, 'default-route': ['10.1.1.1'],
  }]));
  t.deepEqual(n, {
    name: 'sriov', namespace: 'net', ips: ['10.1.1.5/24', 'fd00::5'], mac: 'c2:b0:57:49:47:f1', infinibandGuid: '00:00:00:00:00:00:00:01',
    interface: 'sr0', portMappings: [{ hostPort: 8080, containerPort: 80, protocol: 'tcp', hostIP: '10.0.0.1' }],
    bandwidth: { ingressRate: 1000, ingressBurst: 2000, egressRate: 3000, egressBurst: 4000 }, deviceId: '0000:3b:02.0',
    cniArgs: { foo: 'bar', n: 1 }, defaultRoute: ['10.1.1.1'],
  });
  t.deepEqual(parse('[{"Name":"a","NAMESPACE":"b","Interface":"x1"}]'), [{ name: 'a', namespace: 'b', interface: 'x1' }]);
  t.deepEqual(parse('[{"name":"a","interfaceRequest":"old0"}]'), [{ name: 'a', namespace: 'default', interface: 'old0' }]);
  t.deepEqual(parse('[{"name":"a","interfaceRequest":"old0","interface":"new0"}]')[0]!.interface, 'new0');
});

test('KubeVirt\'s annotation for a VMI with a secondary network and a binding plugin: hashed pod interface, "cni-args": null, and the binding\'s entry with logicNetworkName', (t) => {
  // As virt-controller marshals []NetworkSelectionElement (Go field order; cni-args has no omitempty).
  const kubevirt = '[{"name":"blue","namespace":"default","interface":"pod16477688c0e","cni-args":null},'
    + '{"name":"knit-tap-binding","namespace":"default","cni-args":{"logicNetworkName":"blue"}}]';
  t.deepEqual(parse(kubevirt, 'vms'), [
    { name: 'blue', namespace: 'default', interface: 'pod16477688c0e' },
    { name: 'knit-tap-binding', namespace: 'default', cniArgs: { logicNetworkName: 'blue' } },
  ]);
});

test('an empty annotation asks for nothing', (t) => {
  t.deepEqual(parse(''), []);
  t.deepEqual(parse('  '), []);
  t.deepEqual(parse('[]'), []);
});

const refusal = (t: import('ava').ExecutionContext, text: string, field: string, says: RegExp) => {
  const err = t.throws(() => parse(text), { instanceOf: KnitError })!;
  t.is(err.code, 'INVALID_ARGUMENT');
  t.is(err.details.field, `annotations["k8s.v1.cni.cncf.io/networks"]${field}`, text);
  t.regex(err.message, says);
};

test('what Multus refuses is refused, naming the entry and the field', (t) => {
  refusal(t, 'a/b/c', '[0]', /more than one "\/"/);
  refusal(t, 'ok, a@b@c', '[1]', /more than one "@"/);
  refusal(t, 'Upper', '[0]', /"Upper" is not a DNS-1123 label/);
  refusal(t, 'ns_1/net', '[0]', /"ns_1" is not a DNS-1123 label/);
  refusal(t, 'net@averyveryverylongname', '[0]', /longer than 15 bytes/);
  refusal(t, 'a,,b', '[1]', /names no network/);
  refusal(t, '[{"name": "a"', '', /is not a JSON list/);
  refusal(t, '{"name": "a"}', '', /must be a JSON list/);
  refusal(t, '[{"namespace": "x"}]', '[0].name', /names no network/);
  refusal(t, '[{"name": "a", "mac": "zz:00:00:00:00:00"}]', '[0].mac', /not a MAC address/);
  refusal(t, '[{"name": "a", "ips": ["10.1.1.300"]}]', '[0].ips[0]', /not an IP address or CIDR/);
  refusal(t, '[{"name": "a", "ips": "10.1.1.3"}]', '[0].ips', /must be a list of strings/);
  refusal(t, '[{"name": "a", "interface": "a b"}]', '[0].interface', /white space/);
  refusal(t, '[{"name": "a", "default-route": ["x"]}]', '[0].default-route[0]', /not an IP address/);
  refusal(t, '[{"name": "a", "portMappings": [{"hostPort": "80"}]}]', '[0].portMappings[0].hostPort', /integer/);
  refusal(t, '[{"name": "a", "bandwidth": {"ingressRate": 1.5}}]', '[0].bandwidth.ingressRate', /integer/);
  refusal(t, '[{"name": "a", "cni-args": [1]}]', '[0].cni-args', /must be an object/);
  refusal(t, '[null]', '[0]', /must be an object/);
  // A long value is quoted by its prefix only.
  const err = t.throws(() => parse(`[{"name":"a","mac":"${'x'.repeat(5000)}"}]`))!;
  t.true(err.message.length < 200, err.message);
});

test('MAC addresses as Go\'s net.ParseMAC takes them: 6, 8 or 20 bytes, colons, hyphens or dotted', (t) => {
  for (const ok of ['00:00:5e:00:53:01', '02-00-5E-10-00-00', '0000.5e00.5301', '00:00:5e:00:53:01:02:03', Array(20).fill('ab').join(':')]) t.true(isGoMac(ok), ok);
  for (const bad of ['00:00:5e:00:53', '00:00:5e:00:53:01:02', '00:00-5e:00:53:01', '0:00:5e:00:53:01', '0000.5e00.53', '']) t.false(isGoMac(bad), bad);
});

test('the default-network annotation: one network, its namespace defaulting to the one given (Multus: multusNamespace)', (t) => {
  t.deepEqual(parseDefaultNetwork('calico', 'kube-system'), { name: 'calico', namespace: 'kube-system' });
  t.deepEqual(parseDefaultNetwork('[{"name":"ovn","namespace":"net"}]', 'kube-system'), { name: 'ovn', namespace: 'net' });
  const err = t.throws(() => parseDefaultNetwork('a, b', 'kube-system'), { instanceOf: KnitError })!;
  t.is(err.details.field, 'annotations["v1.multus-cni.io/default-network"]');
});
