// knit-cni's design with none of knit's logic: a grpc-js server (bench/grpc/cni-server.ts) that
// execs `cni`'s bridge + host-local config through the addon, as knit's daemon execs its chain.
// knit-cni minus this row is knit's own logic around the chain (journal, records, libcni's
// cache, parsing the result); this row minus `cni` and the empty call is the exec from a server.
// The server runs under bin/knit's node flags, as knit's daemon does.
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Contender, Flavor, Sandbox, SetupContext } from '../lib/contender.js';
import { ipBatch } from '../lib/exec.js';
import { bridgeHostLocal, CNI_BIN_DIR, keepHostForwarding } from './cni.js';
import { FloorServer } from './floor-service.js';
import { launcherNodeFlags } from '../lib/knit-process.js';

export class GrpcCniContender implements Contender {
  readonly name = 'grpc-cni';
  readonly label = 'gRPC + the same CNI chain exec\'d by the server (no knit logic; bin/knit\'s node flags)';
  readonly kind = 'network';
  readonly flavors: readonly Flavor[] = ['runc'];
  readonly maxConcurrency = 16;
  private readonly server = new FloorServer();
  private bridge = '';
  private restoreForwarding?: () => void;

  async setup(ctx: SetupContext): Promise<void> {
    this.bridge = ctx.network.bridge;
    this.restoreForwarding = keepHostForwarding();
    const configFile = path.join(ctx.scratch, 'grpc-cni.json');
    writeFileSync(configFile, JSON.stringify({ cniVersion: '1.0.0', name: `${ctx.prefix}-grpc-cni`, ...bridgeHostLocal(ctx) }));
    await this.server.start(ctx, 'cni-server.js', [path.join(CNI_BIN_DIR, 'bridge'), configFile], 'CNI exec server', launcherNodeFlags());
  }

  attach(sb: Sandbox): Promise<void> {
    return this.server.call('Attach', { sandbox_id: sb.id, netns_path: sb.netnsPath, ifname: sb.ifname });
  }

  detach(sb: Sandbox): Promise<void> {
    return this.server.call('Detach', { sandbox_id: sb.id, netns_path: sb.netnsPath, ifname: sb.ifname });
  }

  daemonPid(): number | undefined {
    return this.server.pid;
  }

  async teardown(): Promise<void> {
    await this.server.stop();
    if (this.bridge) await ipBatch([`link del ${this.bridge}`], undefined, true);
    this.restoreForwarding?.();
  }
}
