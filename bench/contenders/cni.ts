// Debian's CNI bridge + host-local plugins, exec'd the way a container runtime does it: the
// network config on stdin, CNI_* in the environment, one process per ADD and per DEL.
// host-local keeps its allocations in a private dataDir; the plugin makes the bridge on the
// first ADD and DEL never removes it, so teardown does.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { cniEnv, exec, ipBatch, spawnAsRuntime } from '../lib/exec.js';
import type { Contender, Flavor, Sandbox, SetupContext } from '../lib/contender.js';

export const CNI_BIN_DIR = '/usr/lib/cni';

const IP_FORWARD = '/proc/sys/net/ipv4/ip_forward';

/** The bridge plugin's isGateway switches the host's IPv4 forwarding on (and leaves it on);
 * a bench run puts it back as it found it. Answers the function that does. */
export function keepHostForwarding(): () => void {
  const before = readFileSync(IP_FORWARD, 'utf8');
  return () => writeFileSync(IP_FORWARD, before);
}

/** The bridge plugin's config with host-local IPAM for the contender's network (without
 * name and cniVersion): exec'd directly here, and as knit's CNI chain by `knit-cni`. */
export function bridgeHostLocal(ctx: SetupContext): Record<string, unknown> {
  const net = ctx.network;
  const dataDir = path.join(ctx.scratch, 'ipam');
  mkdirSync(dataDir, { recursive: true });
  return {
    type: 'bridge',
    bridge: net.bridge,
    isGateway: true,
    ipMasq: false,
    // As a Kubernetes node runs it (kubenet set it too): pods must reach themselves through
    // their Service, and knit's networks have hairpin on by default, so both pay for it.
    hairpinMode: true,
    ipam: { type: 'host-local', dataDir, ranges: [[{ subnet: net.subnet, gateway: net.gateway }]], routes: [{ dst: '0.0.0.0/0' }] },
  };
}

export class CniContender implements Contender {
  readonly name = 'cni';
  readonly label = 'CNI bridge+host-local';
  readonly kind = 'network';
  readonly flavors: readonly Flavor[] = ['runc'];
  readonly maxConcurrency = 16;
  private config = '';
  private bridge = '';
  private restoreForwarding?: () => void;

  async setup(ctx: SetupContext): Promise<void> {
    this.bridge = ctx.network.bridge;
    this.restoreForwarding = keepHostForwarding();
    this.config = JSON.stringify({ cniVersion: '1.0.0', name: `${ctx.prefix}-cni`, ...bridgeHostLocal(ctx) });
    await exec(path.join(CNI_BIN_DIR, 'bridge'), [], { env: { CNI_COMMAND: 'VERSION' } }).catch((e: Error) => {
      throw new Error(`CNI plugins not usable (apt-get install containernetworking-plugins): ${e.message}`);
    });
  }

  async attach(sb: Sandbox): Promise<void> {
    await this.call('ADD', sb);
  }

  async detach(sb: Sandbox): Promise<void> {
    await this.call('DEL', sb);
  }

  async teardown(): Promise<void> {
    if (this.bridge) await ipBatch([`link del ${this.bridge}`], undefined, true);
    this.restoreForwarding?.();
  }

  private async call(command: 'ADD' | 'DEL', sb: Sandbox): Promise<void> {
    const r = await spawnAsRuntime(path.join(CNI_BIN_DIR, 'bridge'), cniEnv(command, sb, CNI_BIN_DIR), this.config);
    if (r.code !== 0) {
      throw new Error(`CNI ${command} ${sb.id} (netns ${sb.netnsName}): exit ${r.code}: ${(r.stdout || r.stderr).trim()}`);
    }
  }
}
