// What knit says about a bridge's br_netfilter switches (src/core/networks.ts), against a
// kernel answer written here: a kernel without br_netfilter cannot be booted on this machine
// (it is built in), so its answer (ENOENT for the sysctl the module registers) is a stand-in.
import test from 'ava';
import { bridgeNetfilterProblems } from '../../src/core/networks.js';
import type { LinkInfo } from '../../src/base/ops.js';
import type { NetworkSpec } from '../../src/base/strategy.js';
import type { RunOps } from '../../src/net/find-link.js';

const net = (bridgeNetfilter?: boolean): NetworkSpec => ({ name: 'pods', mode: 'bridge', bridge: 'br0', mtu: 1500, hairpin: true, routes: [], ...(bridgeNetfilter !== undefined && { bridgeNetfilter }) });
const bridge = (v4: boolean, v6: boolean): LinkInfo => ({
  index: 3, name: 'br0', kind: 'bridge', mtu: 1500, up: true, lowerUp: true, operstate: 'up', group: 0, bridge: { nfCallIptables: v4, nfCallIp6tables: v6 },
});
const kernel = (hasBrNetfilter: boolean): RunOps => (async () => {
  if (hasBrNetfilter) return [{ value: '0' }];
  throw Object.assign(new Error('ENOENT reading sysctl'), { code: 'ENOENT' });
}) as unknown as RunOps;

test('switches as the network asks: nothing to say', async (t) => {
  t.deepEqual(await bridgeNetfilterProblems(kernel(true), net(), bridge(true, true)), []);
  t.deepEqual(await bridgeNetfilterProblems(kernel(true), net(false), bridge(false, false)), []);
  t.deepEqual(await bridgeNetfilterProblems(kernel(false), net(false), bridge(false, false)), [], 'off needs no br_netfilter');
});

test('each switch that differs, in one sentence naming the bridge, the switch and the network', async (t) => {
  t.deepEqual(await bridgeNetfilterProblems(kernel(true), net(true), bridge(true, false)), ['bridge br0 has nf_call_ip6tables off; network pods has bridgeNetfilter true']);
  t.deepEqual(await bridgeNetfilterProblems(kernel(true), net(false), bridge(true, true)), [
    'bridge br0 has nf_call_iptables on; network pods has bridgeNetfilter false',
    'bridge br0 has nf_call_ip6tables on; network pods has bridgeNetfilter false',
  ]);
});

test('a kernel without br_netfilter (stand-in answer): the cause, once, instead of the switches', async (t) => {
  const [problem, ...rest] = await bridgeNetfilterProblems(kernel(false), net(), { ...bridge(false, false), bridge: undefined });
  t.deepEqual(rest, []);
  t.regex(problem, /^bridge br0: this kernel has no br_netfilter in knit's netns \(no net\.bridge\.bridge-nf-call-iptables\).*modprobe br_netfilter/);
});

test('not a bridge network: nothing', async (t) => {
  t.deepEqual(await bridgeNetfilterProblems(kernel(false), { ...net(), mode: 'routed' }, bridge(false, false)), []);
});
