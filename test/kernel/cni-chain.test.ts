// Networks of mode "cni": knit executes real conflists of Debian's plugins (/usr/lib/cni) the
// way libcni does, with the chain as a journaled step of its plan. The daemon runs in its own
// "host" netns, so what the plugins do to the host (bridge, veths, iptables chains of portmap
// and firewall, bandwidth's ifb) is observable there with ip/tc/nft and goes with the netns.
import test from 'ava';
import { status } from '@grpc/grpc-js';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startDaemon, cleanupDaemon, ipJson, pingFrom, runcAttachReq, podFactory, eventually, CLI, type Daemon } from '../helpers/daemon.js';
import { crashAndRestart } from '../helpers/crash.js';
import { uniquePrefix } from '../helpers/names.js';
import { DEBIAN_PLUGINS, cacheEntries, conflist, hostLocal, knitShimConf, leases, nftRuleset, scriptLog, scriptPlugin, tcJson } from '../helpers/cni.js';

const P = uniquePrefix('bchn');
const HOST = `${P}h`; // the daemon's "host" netns
const dir = mkdtempSync(path.join(os.tmpdir(), `knit-${P}`));
const cacheDir = path.join(dir, 'cache');
const dataDir = path.join(dir, 'ipam');
const scripts = path.join(dir, 'plugins');
const { pod, netnsNames, ids } = podFactory(P);

const chain = {
  full: `${P}full`, bw: `${P}bw`, ptp: `${P}ptp`, mvl: `${P}mvl`, bad: `${P}bad`, hang: `${P}hang`, file: `${P}file`, v11: `${P}v11`,
  seen: `${P}seen`,
};
/** A conflist in a file, as a ConfigMap mounts it. */
const conflistFile = path.join(dir, 'configmap', 'file.conflist');
mkdirSync(path.dirname(conflistFile), { recursive: true });
const cni = (name: string, list: object, extra: object = {}) => ({
  name, mode: 'cni', cni: { conflist: list, cacheDir, ...extra },
});

let d: Daemon | undefined;
const opts = {
  prefix: P,
  subnet: '10.172.1.0/24',
  netns: HOST,
  extraNetworks: [
    cni(chain.full, conflist(chain.full, [
      { type: 'bridge', bridge: `${P}cb`, isGateway: true, ipMasq: false, ipam: hostLocal(dataDir, '10.172.2.0/24', '10.172.2.1') },
      { type: 'portmap', capabilities: { portMappings: true }, snat: true },
      { type: 'bandwidth', ingressRate: 8_000_000, ingressBurst: 80_000, egressRate: 8_000_000, egressBurst: 80_000 },
      { type: 'tuning', sysctl: { 'net.ipv4.conf.eth0.accept_redirects': '0', 'net.core.somaxconn': '321' } },
      { type: 'firewall', backend: 'iptables' },
    ])),
    cni(chain.bw, conflist(chain.bw, [
      { type: 'bridge', bridge: `${P}cw`, ipam: hostLocal(dataDir, '10.172.10.0/24') },
      { type: 'bandwidth', capabilities: { bandwidth: true } },
    ])),
    cni(chain.ptp, conflist(chain.ptp, [{ type: 'ptp', ipam: hostLocal(dataDir, '10.172.3.0/24') }])),
    cni(chain.mvl, conflist(chain.mvl, [{ type: 'macvlan', master: `${P}mv0`, mode: 'bridge', ipam: { ...hostLocal(dataDir, '10.172.4.0/24'), routes: [] } }])),
    cni(chain.bad, conflist(chain.bad, [
      { type: 'bridge', bridge: `${P}cf`, ipam: hostLocal(dataDir, '10.172.5.0/24') },
      { type: 'bfail' },
    ]), { pluginDirs: [scripts, DEBIAN_PLUGINS] }),
    cni(chain.hang, conflist(chain.hang, [
      { type: 'bridge', bridge: `${P}cg`, ipam: hostLocal(dataDir, '10.172.6.0/24') },
      { type: 'bhang' },
    ]), { pluginDirs: [scripts, DEBIAN_PLUGINS], timeoutMs: 1500 }),
    { name: chain.file, mode: 'cni', cni: { conflistFile, cacheDir } },
    cni(chain.v11, conflist(chain.v11, [{ type: 'bnew' }], '1.1.0'), { pluginDirs: [scripts] }),
    cni(chain.seen, conflist(chain.seen, [{ type: 'ptp', ipam: hostLocal(dataDir, '10.172.13.0/24') }, { type: 'bseen' }]), { pluginDirs: [scripts, DEBIAN_PLUGINS] }),
  ],
};

const attach = (p: { id: string; path: string }, network: string, extra: object = {}, on: Daemon = d!) =>
  on.call('Attach', runcAttachReq(p.id, p.path, { extra: { interfaces: [{ name: 'eth0', network }], ...extra } }));

const inHost = (args: string[]) => ipJson(args, HOST);
const portsOn = (bridge: string) => inHost(['link', 'show']).filter((l: any) => l.master === bridge).map((l: any) => l.ifname);

test.before(async () => {
  execFileSync('ip', ['netns', 'add', HOST]);
  execFileSync('ip', ['-n', HOST, 'link', 'set', 'lo', 'up']);
  // The macvlan chain's parent: a veth the test makes.
  execFileSync('ip', ['-n', HOST, 'link', 'add', `${P}mv0`, 'type', 'veth', 'peer', 'name', `${P}mv1`]);
  execFileSync('ip', ['-n', HOST, 'link', 'set', `${P}mv0`, 'up']);
  execFileSync('ip', ['-n', HOST, 'link', 'set', `${P}mv1`, 'up']);
  scriptPlugin(scripts, 'bfail', `echo "bfail says no to $CNI_CONTAINERID" >&2; echo '{"cniVersion":"1.0.0","code":7,"msg":"bfail refuses this pod"}'; exit 1`);
  // It hangs in a helper it forked: the deadline must take the helper too.
  scriptPlugin(scripts, 'bseen', ''); // logs every command it is run with
  scriptPlugin(scripts, 'bhang', `sleep 600 & echo $! > ${scripts}/bhang.child; echo $$ > ${scripts}/bhang.pid; wait`);
  // A CNI 1.1.0 plugin (Debian's stop at 1.0.0): it answers STATUS (failing while bnew.down
  // exists) and records what GC sends it.
  writeFileSync(path.join(scripts, 'bnew'), `#!/bin/sh
conf=$(cat)
case "$CNI_COMMAND" in
VERSION) echo '{"cniVersion":"1.1.0","supportedVersions":["1.0.0","1.1.0"]}';;
ADD) echo '{"cniVersion":"1.1.0","interfaces":[{"name":"'$CNI_IFNAME'","sandbox":"'$CNI_NETNS'"}],"ips":[]}';;
GC) echo "$conf" > ${scripts}/bnew.gc;;
STATUS) if [ -e ${scripts}/bnew.down ]; then echo '{"cniVersion":"1.1.0","code":50,"msg":"bnew has no upstream"}'; exit 1; fi;;
esac
exit 0
`, { mode: 0o755 });
  writeFileSync(conflistFile, JSON.stringify(conflist(chain.file, [{ type: 'ptp', ipam: hostLocal(dataDir, '10.172.9.0/24') }])));
  d = await startDaemon(opts);
});

test.after.always(async () => {
  await cleanupDaemon(d, opts, ids);
  for (const n of netnsNames) execFileSync('ip', ['netns', 'del', n], { stdio: 'ignore' });
  for (const pidFile of ['bhang.pid', 'bhang.child'].map((f) => path.join(scripts, f))) {
    if (!existsSync(pidFile)) continue;
    try {
      process.kill(Number(readFileSync(pidFile, 'utf8')), 'SIGKILL');
    } catch {
      /* killed by knit, as it should be */
    }
  }
  execFileSync('ip', ['netns', 'del', HOST], { stdio: 'ignore' });
  rmSync(dir, { recursive: true, force: true });
});

test.serial("an Attach's bandwidth reaches the chain's bandwidth plugin (capability arg), and DEL takes the shaping back", async (t) => {
  const p = pod(20);
  const res = await attach(p, chain.bw, {
    interfaces: [{ name: 'eth0', network: chain.bw, bandwidth: { ingress_rate: '4000000', egress_rate: '2000000' } }],
  });
  const hostVeth = res.result.interfaces.find((i: any) => !i.sandbox && i.name !== `${P}cw`).name;
  // The plugin shapes the pod's ingress with tbf on the host veth and its egress through an ifb.
  const tbf = tcJson(['qdisc', 'show', 'dev', hostVeth], HOST).find((q: any) => q.kind === 'tbf');
  t.truthy(tbf, 'tbf on the host veth');
  t.is(tbf.options.rate, 500_000, 'ingress rate 4 Mbit/s = 500,000 bytes/s');
  const ifb = inHost(['-d', 'link', 'show']).find((l: any) => l.linkinfo?.info_kind === 'ifb');
  t.truthy(ifb, 'an ifb for the pod egress');
  t.is(tcJson(['qdisc', 'show', 'dev', ifb.ifname], HOST).find((q: any) => q.kind === 'tbf')?.options.rate, 250_000);
  await d!.call('Detach', { sandbox_id: p.id });
  await eventually(() => !inHost(['-d', 'link', 'show']).some((l: any) => l.linkinfo?.info_kind === 'ifb'), 'the ifb is gone');
  t.deepEqual(portsOn(`${P}cw`), []);
});

test.serial('bridge + host-local + portmap + bandwidth + tuning + firewall: ADD builds it all, traffic flows, DEL takes it all back', async (t) => {
  const p = pod(1);
  const res = await attach(p, chain.full, { port_mappings: [{ protocol: 'TCP', container_port: 80, host_port: 18080 }] });
  const r = res.result;
  const podIf = r.interfaces.find((i: any) => i.sandbox === p.path);
  t.is(podIf.name, 'eth0');
  t.truthy(r.interfaces.find((i: any) => i.name === `${P}cb`), 'the bridge plugin reported its bridge');
  t.regex(r.ips[0].address, /^10\.172\.2\.\d+\/24$/);
  t.is(r.ips[0].gateway, '10.172.2.1');
  const podIp = r.ips[0].address.split('/')[0];

  // ip: eth0 in the pod with the address and MAC the chain reported; its host veth on the bridge.
  const [eth0] = ipJson(['addr', 'show', 'dev', 'eth0'], p.ns);
  t.is(eth0.address, podIf.mac);
  t.true(eth0.addr_info.some((a: any) => a.local === podIp), 'the address on eth0');
  const hostVeth = r.interfaces.find((i: any) => !i.sandbox && i.name !== `${P}cb`).name;
  t.deepEqual(portsOn(`${P}cb`), [hostVeth]);
  // tuning: the sysctl, read inside the pod.
  t.is(execFileSync('ip', ['netns', 'exec', p.ns, 'cat', '/proc/sys/net/core/somaxconn'], { encoding: 'utf8' }).trim(), '321');
  // bandwidth: tbf on the host veth (egress of the pod) and an ifb for its ingress.
  t.true(tcJson(['qdisc', 'show', 'dev', hostVeth], HOST).some((q: any) => q.kind === 'tbf'), 'tbf on the host veth');
  t.true(inHost(['link', 'show']).some((l: any) => l.linkinfo?.info_kind === 'ifb'), 'an ifb for the pod ingress');
  // portmap + firewall: their iptables chains (iptables-nft) in the host netns.
  const rules = JSON.stringify(nftRuleset(HOST));
  t.true(rules.includes('CNI-HOSTPORT-DNAT') && rules.includes('18080'), 'portmap DNAT for host port 18080');
  t.true(rules.includes('CNI-FORWARD') && rules.includes(podIp), 'firewall rules for the pod address');
  // Traffic: the host pings the pod; a TCP connection to host port 18080 reaches the pod's port 80.
  t.true(pingFrom(HOST, podIp), 'the host pings the pod');
  const server = spawn('ip', ['netns', 'exec', p.ns, 'python3', '-c',
    'import socket; s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("0.0.0.0", 80)); s.listen(); c,_=s.accept(); c.sendall(b"hello from the pod"); c.close()']);
  try {
    const got = await eventually(() => {
      try {
        return execFileSync('ip', ['netns', 'exec', HOST, 'python3', '-c',
          'import socket; s=socket.create_connection(("10.172.2.1", 18080), 2); print(s.recv(100).decode())'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
      } catch {
        return undefined;
      }
    }, 'a TCP answer through the host port');
    t.is(got, 'hello from the pod');
  } finally {
    server.kill('SIGKILL');
  }
  // The libcni cache: cniCacheV1 with the list's text, the args and the final result.
  const file = path.join(cacheDir, 'results', `${chain.full}-${p.id}-eth0`);
  const cached = JSON.parse(readFileSync(file, 'utf8'));
  t.is(cached.kind, 'cniCacheV1');
  t.is(cached.containerId, p.id);
  t.is(cached.networkName, chain.full);
  t.is(JSON.parse(Buffer.from(cached.config, 'base64').toString()).name, chain.full);
  t.deepEqual(cached.capabilityArgs.portMappings, [{ hostPort: 18080, containerPort: 80, protocol: 'tcp' }]);
  t.true(cached.cniArgs.some(([k, v]: string[]) => k === 'K8S_POD_NAME' && v === p.id));
  t.is(cached.result.ips[0].address, r.ips[0].address);
  t.deepEqual(leases(dataDir, chain.full), [podIp], 'host-local leased the address');
  // knit check runs the chain's CNI CHECK: Debian's portmap 1.1.1 looks for its IPv4 DNAT rules
  // in ip6tables as well and reports them missing, which knit passes on as it is.
  const checked = await d!.call('Check', { sandbox_id: p.id });
  t.deepEqual(checked.differences.filter((x: string) => !/CNI plugin portmap CHECK: could not check ipv6 dnat/.test(x)), []);

  await d!.call('Detach', { sandbox_id: p.id });
  t.deepEqual(portsOn(`${P}cb`), [], 'no veth left on the bridge');
  t.false(inHost(['link', 'show']).some((l: any) => l.linkinfo?.info_kind === 'ifb'), 'the ifb is gone');
  const after = JSON.stringify(nftRuleset(HOST));
  t.false(after.includes('18080'), 'no DNAT for the host port');
  t.false(after.includes(podIp), 'no firewall rule for the pod address');
  t.false(existsSync(file), 'the cache entry is gone');
  t.deepEqual(leases(dataDir, chain.full), [], 'the lease is released');
  t.deepEqual(ipJson(['link', 'show'], p.ns).map((l: any) => l.ifname), ['lo']);
});

test.serial('ptp: a veth pair with a host route to the pod, no bridge; knit check runs CNI CHECK', async (t) => {
  const p = pod(2);
  const r = (await attach(p, chain.ptp)).result;
  const podIp = r.ips[0].address.split('/')[0];
  t.regex(podIp, /^10\.172\.3\./);
  const hostVeth = r.interfaces.find((i: any) => !i.sandbox);
  const [link] = inHost(['link', 'show', 'dev', hostVeth.name]);
  t.is(link.linkinfo.info_kind, 'veth');
  t.is(link.master, undefined);
  t.true(inHost(['route', 'show']).some((rt: any) => rt.dst === podIp && rt.dev === hostVeth.name));
  t.true(pingFrom(HOST, podIp));
  // knit check: the record against the kernel, plus the chain's CNI CHECK.
  const clean = await d!.call('Check', { sandbox_id: p.id });
  t.true(clean.ok, clean.differences.join('; '));
  execFileSync('ip', ['-n', p.ns, 'addr', 'flush', 'dev', 'eth0']);
  const drift = await d!.call('Check', { sandbox_id: p.id });
  t.false(drift.ok);
  t.true(drift.differences.some((x: string) => x.startsWith(`address ${r.ips[0].address} is missing`)), drift.differences.join('; '));
  t.true(drift.differences.some((x: string) => /^CNI CHECK of network .*: CNI plugin ptp CHECK: /.test(x)), drift.differences.join('; '));
  await d!.call('Detach', { sandbox_id: p.id });
  t.deepEqual(inHost(['link', 'show']).filter((l: any) => l.ifname === hostVeth.name), []);
  t.deepEqual(leases(dataDir, chain.ptp), []);
});

test.serial('a conflist from a file (a mounted ConfigMap): read at each attach; a pod keeps the config it was added with', async (t) => {
  const p = pod(13);
  const r = (await attach(p, chain.file)).result;
  t.regex(r.ips[0].address, /^10\.172\.9\./);
  const cached = JSON.parse(readFileSync(path.join(cacheDir, 'results', `${chain.file}-${p.id}-eth0`), 'utf8'));
  t.is(Buffer.from(cached.config, 'base64').toString(), readFileSync(conflistFile, 'utf8'));
  // The ConfigMap changes: the next pod gets the new range, the running one is DEL'd with its own.
  writeFileSync(conflistFile, JSON.stringify(conflist(chain.file, [{ type: 'ptp', ipam: hostLocal(dataDir, '10.172.12.0/24') }])));
  const q = pod(14);
  const r2 = (await attach(q, chain.file)).result;
  t.regex(r2.ips[0].address, /^10\.172\.12\./);
  await d!.call('Detach', { sandbox_id: p.id });
  await d!.call('Detach', { sandbox_id: q.id });
  t.deepEqual(leases(dataDir, chain.file), [], 'both leases released, each by its own config');
  t.deepEqual(cacheEntries(cacheDir).filter((f) => f.startsWith(chain.file)), []);
});

test.serial('macvlan on a veth parent the test made: two pods on it reach each other', async (t) => {
  const [a, b] = [pod(3), pod(4)];
  const ra = (await attach(a, chain.mvl)).result;
  const rb = (await attach(b, chain.mvl)).result;
  const [la] = ipJson(['link', 'show', 'dev', 'eth0'], a.ns);
  t.is(la.linkinfo.info_kind, 'macvlan');
  t.is(la.linkinfo.info_data.mode, 'bridge');
  t.true(pingFrom(a.ns, rb.ips[0].address.split('/')[0]), 'pod a pings pod b through the macvlan bridge');
  await d!.call('Detach', { sandbox_id: a.id });
  await d!.call('Detach', { sandbox_id: b.id });
  t.deepEqual(ipJson(['link', 'show'], a.ns).map((l: any) => l.ifname), ['lo']);
  t.deepEqual(leases(dataDir, chain.mvl), []);
  void ra;
});

test.serial('a plugin that fails halfway: the earlier plugins are DEL\'d, the error names it, its stderr is logged with the sandbox id', async (t) => {
  const p = pod(5);
  const err: any = await t.throwsAsync(attach(p, chain.bad));
  t.is(err.code, status.UNAVAILABLE);
  t.regex(err.message, /CNI plugin bfail ADD: bfail refuses this pod/);
  t.deepEqual(scriptLog(scripts, 'bfail').filter((l) => l.endsWith(p.id)), [`ADD ${p.id}`, `DEL ${p.id}`]);
  t.deepEqual(portsOn(`${P}cf`), [], 'the bridge plugin\'s veth is gone');
  t.deepEqual(leases(dataDir, chain.bad), [], 'host-local released the address');
  t.deepEqual(cacheEntries(cacheDir).filter((f) => f.includes(p.id)), []);
  t.deepEqual(ipJson(['link', 'show'], p.ns).map((l: any) => l.ifname), ['lo']);
  t.is((await d!.call('List', {})).sandboxes.filter((s: any) => s.request?.sandbox_id === p.id).length, 0);
  await eventually(() => d!.logs.some((l) => l.includes(`"sandboxId":"${p.id}"`) && l.includes(`bfail says no to ${p.id}`)), 'the plugin stderr in the log');
  t.pass();
});

test.serial('a plugin that hangs is killed at the deadline and the attach rolled back', async (t) => {
  const p = pod(6);
  const err: any = await t.throwsAsync(attach(p, chain.hang));
  t.is(err.code, status.UNAVAILABLE);
  t.regex(err.message, /CNI plugin bhang ADD: did not finish within 1500 ms and was killed/);
  for (const f of ['bhang.pid', 'bhang.child']) {
    const pid = Number(readFileSync(path.join(scripts, f), 'utf8'));
    await eventually(() => !existsSync(`/proc/${pid}`) || readFileSync(`/proc/${pid}/stat`, 'utf8').includes(') Z'), `${f} ${pid} gone`);
  }
  t.deepEqual(portsOn(`${P}cg`), []);
  t.deepEqual(leases(dataDir, chain.hang), []);
  t.deepEqual(ipJson(['link', 'show'], p.ns).map((l: any) => l.ifname), ['lo']);
});

test.serial('port mappings on a chain without the portMappings capability are refused, and change nothing', async (t) => {
  const p = pod(7);
  const err: any = await t.throwsAsync(attach(p, chain.ptp, { port_mappings: [{ protocol: 'TCP', container_port: 80, host_port: 18081 }] }));
  t.is(err.code, status.UNIMPLEMENTED);
  t.regex(err.message, /^\d+ UNIMPLEMENTED: port_mappings: .*no "portMappings" capability/);
  t.deepEqual(ipJson(['link', 'show'], p.ns).map((l: any) => l.ifname), ['lo']);
  t.deepEqual(leases(dataDir, chain.ptp), []);
});

test.serial('knit plan shows the chain plugin by plugin with each config; NodeStatus says STATUS is not supported below 1.1.0', async (t) => {
  const p = pod(8);
  const plan = await d!.call('Plan', { attach: runcAttachReq(p.id, p.path, { extra: { interfaces: [{ name: 'eth0', network: chain.full }] } }) });
  const cniSteps = plan.steps.filter((s: any) => /^CNI ADD/.test(s.description));
  t.deepEqual(cniSteps.map((s: any) => s.description.split(': plugin ')[1].split(' ')[0]), ['bridge', 'portmap', 'bandwidth', 'tuning', 'firewall']);
  t.is(cniSteps[0].op.fields.config.structValue.fields.bridge.stringValue, `${P}cb`);
  t.deepEqual(ipJson(['link', 'show'], p.ns).map((l: any) => l.ifname), ['lo'], 'plan changed nothing');
  const s = await d!.call('NodeStatus', {});
  const n = s.networks.find((x: any) => x.name === chain.full);
  t.is(n.mode, 'cni');
  t.true(n.ready);
  t.regex(n.cni_status, /STATUS not supported.*1\.0\.0 is below 1\.1\.0/);
});

test.serial('kill -9 inside the chain (after bridge, before portmap): the next start rolls it back; kill -9 before the DEL: the next start finishes it', async (t) => {
  const p = pod(9);
  await d!.stop();
  const armed = await d!.restart({ KNIT_FAILPOINT: 'cni:1' });
  d = await crashAndRestart(armed, () => attach(p, chain.full, {}, armed));
  t.deepEqual(portsOn(`${P}cb`), [], 'the veth the bridge plugin made is gone');
  t.deepEqual(ipJson(['link', 'show'], p.ns).map((l: any) => l.ifname), ['lo'], 'the pod netns holds only lo');
  t.deepEqual(leases(dataDir, chain.full), [], 'its lease is released');
  t.deepEqual(cacheEntries(cacheDir).filter((f) => f.includes(p.id)), []);
  t.deepEqual(ipJson(['link', 'show'], p.ns).map((l: any) => l.ifname), ['lo']);
  t.is((await d.call('List', {})).sandboxes.length, 0);
  // And the network works after the repair.
  const r = (await attach(p, chain.full)).result;
  t.true(pingFrom(HOST, r.ips[0].address.split('/')[0]));
  // kill -9 before the chain's DEL: the next start finishes the detach.
  await d.stop();
  const armedDetach = await d.restart({ KNIT_FAILPOINT: 'detach:0' });
  d = await crashAndRestart(armedDetach, () => armedDetach.call('Detach', { sandbox_id: p.id }));
  t.deepEqual(portsOn(`${P}cb`), [], 'detach finished at start-up: no veth');
  t.deepEqual(leases(dataDir, chain.full), []);
  t.deepEqual(cacheEntries(cacheDir).filter((f) => f.includes(p.id)), []);
  t.is((await d.call('List', {})).sandboxes.length, 0);
});

test.serial('GC leaves exactly the valid attachments: knit\'s own records and a cached attachment no record holds', async (t) => {
  const [a, b, c] = [pod(10), pod(11), pod(12)];
  const ra = (await attach(a, chain.ptp)).result;
  await attach(b, chain.ptp);
  // A runtime's attachment from before a migration: made by the same executor, outside knit's
  // records, in the same libcni cache.
  const list = JSON.stringify(conflist(chain.ptp, [{ type: 'ptp', ipam: hostLocal(dataDir, '10.172.3.0/24') }]));
  execFileSync('ip', ['netns', 'exec', HOST, process.execPath, '--input-type=module', '-e', `
    const { addChain } = await import(${JSON.stringify(path.join(path.dirname(CLI), '..', 'cni-exec', 'chain.js'))});
    const { parseConflist } = await import(${JSON.stringify(path.join(path.dirname(CLI), '..', 'cni-exec', 'conflist.js'))});
    await addChain(parseConflist(${JSON.stringify(list)}, 'test'), { containerId: ${JSON.stringify(c.id)}, netns: ${JSON.stringify(c.path)}, ifName: 'eth0', args: [], capabilityArgs: {} },
      { pluginDirs: ['${DEBIAN_PLUGINS}'], cacheDir: ${JSON.stringify(cacheDir)}, timeoutMs: 10000 });`]);
  t.is(leases(dataDir, chain.ptp).length, 3);
  const gc = await d!.call('GarbageCollect', { valid_attachments: [{ sandbox_id: a.id }] });
  t.deepEqual(gc.errors, []);
  t.true(gc.removed.includes(`sandbox ${b.id}`));
  t.true(gc.removed.some((x: string) => x.startsWith(`CNI attachment ${c.id}/eth0`)), gc.removed.join('; '));
  t.deepEqual(cacheEntries(cacheDir), [`${chain.ptp}-${a.id}-eth0`]);
  t.deepEqual(leases(dataDir, chain.ptp), [ra.ips[0].address.split('/')[0]]);
  t.deepEqual(ipJson(['link', 'show'], c.ns).map((l: any) => l.ifname), ['lo'], 'the stray attachment was DEL\'d');
  t.deepEqual(ipJson(['link', 'show'], b.ns).map((l: any) => l.ifname), ['lo']);
  await d!.call('Detach', { sandbox_id: a.id });
  t.deepEqual(cacheEntries(cacheDir), []);
});

test.serial('a CNI 1.1.0 chain: NodeStatus carries its STATUS (and the node is not ready while it fails); GC goes to the plugins with the valid attachments', async (t) => {
  const ready = await d!.call('NodeStatus', {});
  t.like(ready.networks.find((n: any) => n.name === chain.v11), { mode: 'cni', ready: true, cni_status: 'ready' });
  writeFileSync(path.join(scripts, 'bnew.down'), '');
  try {
    const down = await d!.call('NodeStatus', {});
    t.false(down.ready);
    t.like(down.networks.find((n: any) => n.name === chain.v11), { ready: false, cni_status: 'not ready' });
    t.regex(down.message, /CNI STATUS: CNI plugin bnew STATUS: bnew has no upstream/);
  } finally {
    rmSync(path.join(scripts, 'bnew.down'), { force: true });
  }
  const p = pod(15);
  await attach(p, chain.v11);
  const gc = await d!.call('GarbageCollect', { keep_recorded: true });
  t.deepEqual(gc.errors, []);
  const sent = JSON.parse(readFileSync(path.join(scripts, 'bnew.gc'), 'utf8'));
  t.is(sent.cniVersion, '1.1.0');
  t.deepEqual(sent['cni.dev/valid-attachments'], [{ containerID: p.id, ifname: 'eth0' }]);
  await d!.call('Detach', { sandbox_id: p.id });
  t.deepEqual(cacheEntries(cacheDir).filter((f) => f.startsWith(chain.v11)), []);
});

/** knit-cni exec'd as a runtime execs it, against this daemon's CNI socket. */
function shim(command: string, p: { id: string; path: string }, config: object) {
  const r = spawnSync(path.resolve('build', 'native', 'knit-cni'), [], {
    input: JSON.stringify(config),
    encoding: 'utf8',
    env: { PATH: process.env.PATH, CNI_COMMAND: command, CNI_CONTAINERID: p.id, CNI_NETNS: p.path, CNI_IFNAME: 'eth0', CNI_ARGS: '', CNI_PATH: DEBIAN_PLUGINS },
  });
  return { code: r.status, out: r.stdout?.trim() ? JSON.parse(r.stdout) : undefined, raw: r.stdout };
}

test.serial('knit-cni ADD, a repeated ADD and DEL on a chain network run the chain once each way: finding the record runs no CNI CHECK', async (t) => {
  const p = pod(16);
  const conf = knitShimConf(P, d!.dir, { network: chain.seen });
  const add = shim('ADD', p, conf);
  t.is(add.code, 0, add.raw);
  const address = add.out.ips[0].address;
  t.regex(address, /^10\.172\.13\./);
  const [eth0] = ipJson(['addr', 'show', 'dev', 'eth0'], p.ns);
  t.true(eth0.addr_info.some((a: any) => `${a.local}/${a.prefixlen}` === address));
  const again = shim('ADD', p, conf);
  t.is(again.code, 0, again.raw);
  t.is(again.out.ips[0].address, address, 'a repeated ADD answers the recorded result');
  t.is(shim('DEL', p, conf).code, 0);
  // Query's live comparison would have run the chain's CHECK (knit check does, see the ptp test).
  t.deepEqual(scriptLog(scripts, 'bseen').filter((l) => l.endsWith(` ${p.id}`)), [`ADD ${p.id}`, `DEL ${p.id}`]);
  t.deepEqual(ipJson(['link', 'show'], p.ns).map((l: any) => l.ifname), ['lo']);
  t.deepEqual(leases(dataDir, chain.seen), []);
  t.deepEqual(cacheEntries(cacheDir).filter((f) => f.startsWith(chain.seen)), []);
  await t.throwsAsync(d!.call('Query', { sandbox_id: p.id }));
});
