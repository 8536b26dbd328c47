// knit-cni's design with none of knit's logic, as a server: a grpc-js handler that execs the CNI
// plugin with the network config on stdin and CNI_* in the environment, through the addon's
// spawnAndWait as knit's daemon execs its chain, and answers. No journal, records, result
// cache, parsing or checks. What knit-cni takes beyond this contender is the cost of its own
// logic; what this takes beyond `cni` plus the empty call is the exec from a server and the hop.
// Usage: node cni-server.js <socket path> <plugin> <config file>; prints "ready" once bound,
// exits on SIGTERM/EOF.
import { readFileSync } from 'node:fs';
import * as grpc from '@grpc/grpc-js';
import { floorService } from './proto.js';
import { serveChild } from './child-server.js';
import { cniEnv, spawnAsRuntime } from '../lib/exec.js';

const [socket, plugin, configFile] = process.argv.slice(2);
if (!socket || !plugin || !configFile) {
  console.error('usage: cni-server <socket path> <plugin> <config file>');
  process.exit(2);
}
const config = readFileSync(configFile, 'utf8');
const cniPath = plugin.slice(0, plugin.lastIndexOf('/'));

// FloorAttach and FloorDetach both carry these
interface Call { sandbox_id: string; netns_path: string; ifname: string }

function exec(command: 'ADD' | 'DEL'): grpc.handleUnaryCall<Call, object> {
  return (call, done) => {
    const r = call.request;
    spawnAsRuntime(plugin, cniEnv(command, { id: r.sandbox_id, netnsPath: r.netns_path, ifname: r.ifname }, cniPath), config).then(
      (out) => (out.code === 0 ? done(null, {}) : done({ code: grpc.status.INTERNAL, details: `${command}: exit ${out.code}: ${(out.stdout || out.stderr).trim()}` })),
      (err: Error) => done({ code: grpc.status.INTERNAL, details: err.message }),
    );
  };
}

const server = new grpc.Server({ 'grpc.enable_channelz': 0 }); // knit's transport settings
server.addService(floorService().service, { Attach: exec('ADD'), Detach: exec('DEL') });
serveChild(server, socket, 'cni-server');
