// SR-IOV VF settings. There is no SR-IOV hardware here: a veth stands in for the PF (it
// refuses VF settings), and what knit sends is compared byte for byte with what iproute2's
// `ip link set PF vf N ...` sends for the same settings, captured with strace.
import test from 'ava';
import type { ExecutionContext } from 'ava';
import { NetHandle } from '../../src/net/handle.js';
import { KernelError } from '../../src/net/errors.js';
import { listVfs } from '../helpers/net-calls.js';
import type { VfSetOp } from '../../src/base/ops.js';
import { link, netlinkRequests } from '../helpers/observe.js';
import { makeNetns, uniquePrefix } from '../helpers/names.js';

const RTM_NEWLINK = 16;

async function fakePf(t: ExecutionContext, tag: string) {
  const p = uniquePrefix(tag);
  const ns = makeNetns(t, p, 'a');
  const h = NetHandle.open(ns.path);
  t.teardown(() => h.close());
  const pf = `${p}pf`;
  await h.run([{ op: 'link.add', kind: 'veth', name: pf, peer: { name: `${p}pp` } }]);
  return { ns, h, pf, index: link(ns.name, pf).ifindex as number };
}

const cases: { args: string; op: Omit<VfSetOp, 'op' | 'link'> }[] = [
  { args: 'vf 0 mac 02:11:22:33:44:55 vlan 100 qos 3 proto 802.1ad', op: { vf: 0, mac: '02:11:22:33:44:55', vlan: 100, qos: 3, vlanProto: '802.1ad' } },
  { args: 'vf 0 mac 02:11:22:33:44:55 vlan 100 qos 3', op: { vf: 0, mac: '02:11:22:33:44:55', vlan: 100, qos: 3 } },
  { args: 'vf 2 vlan 7 proto 802.1Q', op: { vf: 2, vlan: 7, vlanProto: '802.1Q' } },
  { args: 'vf 1 spoofchk on', op: { vf: 1, spoofchk: true } },
  { args: 'vf 1 trust on', op: { vf: 1, trust: true } },
  { args: 'vf 2 min_tx_rate 10 max_tx_rate 100', op: { vf: 2, minTxRate: 10, maxTxRate: 100 } },
  { args: 'vf 3 state enable', op: { vf: 3, linkState: 'enable' } },
  {
    args: 'vf 0 mac 02:11:22:33:44:55 vlan 100 qos 3 spoofchk off trust on min_tx_rate 5 max_tx_rate 50 state disable',
    op: { vf: 0, mac: '02:11:22:33:44:55', vlan: 100, qos: 3, spoofchk: false, trust: true, minTxRate: 5, maxTxRate: 50, linkState: 'disable' },
  },
];

test('vf.set sends the bytes `ip link set PF vf N ...` sends (simulated: no SR-IOV hardware)', async (t) => {
  const { ns, h, pf, index } = await fakePf(t, 'knva');
  for (const c of cases) {
    const sent = netlinkRequests('ip', ['-n', ns.name, 'link', 'set', pf, ...c.args.split(' ')]).filter((b) => b.readUInt16LE(4) === RTM_NEWLINK);
    t.is(sent.length, 1, `iproute2 sent one RTM_NEWLINK for: ${c.args}`);
    const ours = h.encode({ op: 'vf.set', link: index, ...c.op });
    t.is(ours.toString('hex'), sent[0].toString('hex'), c.args);
    // By name knit looks the index up first, so the request is the same.
    t.is(h.encode({ op: 'vf.set', link: pf, ...c.op }).toString('hex'), ours.toString('hex'), `${c.args} (by name)`);
  }
});

test('vf.set on a link without SR-IOV fails with a typed EOPNOTSUPP naming the PF and VF (simulated: no SR-IOV hardware)', async (t) => {
  const { ns, h, pf } = await fakePf(t, 'knvb');
  const err = await t.throwsAsync(h.run([{ op: 'vf.set', link: pf, vf: 0, mac: '02:11:22:33:44:55', trust: true }]), { instanceOf: KernelError });
  t.is(err!.code, 'EOPNOTSUPP');
  t.is(err!.index, 0);
  t.is(err!.netns, ns.path);
  t.regex(err!.message, new RegExp(`^EOPNOTSUPP configuring VF 0 of ${pf}: the link does not support SR-IOV VF settings`));
  t.deepEqual(await listVfs(h, pf), [], 'a veth reports no VFs');
});

// An RTM_NEWLINK as a PF driver would answer it, built attribute by attribute.
function attr(type: number, payload: Buffer): Buffer {
  const len = 4 + payload.length;
  const b = Buffer.alloc((len + 3) & ~3);
  b.writeUInt16LE(len, 0);
  b.writeUInt16LE(type, 2);
  payload.copy(b, 4);
  return b;
}
function u32s(...v: number[]): Buffer {
  const b = Buffer.alloc(4 * v.length);
  v.forEach((x, i) => b.writeUInt32LE(x >>> 0, 4 * i));
  return b;
}

test('link.get vfs: IFLA_VFINFO_LIST is parsed into VfInfo (simulated: no SR-IOV hardware)', (t) => {
  const mac = Buffer.alloc(32);
  Buffer.from([2, 0x11, 0x22, 0x33, 0x44, 0x55]).copy(mac);
  const vlanInfo = Buffer.alloc(16);
  vlanInfo.writeUInt32LE(1, 0);
  vlanInfo.writeUInt32LE(200, 4);
  vlanInfo.writeUInt32LE(5, 8);
  vlanInfo.writeUInt16BE(0x88a8, 12);
  const vf0 = attr(1, Buffer.concat([
    attr(1, Buffer.concat([u32s(0), mac])),          // IFLA_VF_MAC
    attr(2, u32s(0, 100, 3)),                        // IFLA_VF_VLAN
    attr(4, u32s(0, 1)),                             // IFLA_VF_SPOOFCHK on
    attr(9, u32s(0, 0)),                             // IFLA_VF_TRUST off
    attr(6, u32s(0, 10, 1000)),                      // IFLA_VF_RATE
    attr(5, u32s(0, 1)),                             // IFLA_VF_LINK_STATE enable
  ]));
  const vf1 = attr(1, Buffer.concat([
    attr(1, Buffer.concat([u32s(1), Buffer.alloc(32)])),
    attr(12, attr(1, Buffer.concat([vlanInfo]))),    // IFLA_VF_VLAN_LIST > IFLA_VF_VLAN_INFO
    attr(4, u32s(1, 0xffffffff)),                    // spoofchk unsupported: not reported
    attr(5, u32s(1, 2)),
  ]));
  const ifi = Buffer.alloc(16);
  ifi.writeInt32LE(7, 4);
  const body = Buffer.concat([ifi, attr(3, Buffer.from('pf0\0')), attr(22, Buffer.concat([vf0, vf1]))]);
  const hdr = Buffer.alloc(16);
  hdr.writeUInt32LE(16 + body.length, 0);
  hdr.writeUInt16LE(RTM_NEWLINK, 4);
  const info = NetHandle.decodeLink(Buffer.concat([hdr, body]));
  t.is(info.name, 'pf0');
  t.is(info.index, 7);
  t.deepEqual(info.vfs, [
    { vf: 0, mac: '02:11:22:33:44:55', vlan: 100, qos: 3, spoofchk: true, trust: false, minTxRate: 10, maxTxRate: 1000, linkState: 'enable' },
    { vf: 1, mac: '00:00:00:00:00:00', vlan: 200, qos: 5, vlanProto: '802.1ad', linkState: 'disable' },
  ]);
});
