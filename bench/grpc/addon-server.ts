// The lower bound of knit's design, as a server: a grpc-js handler that sends the C floor's
// netlink requests through knit's addon with the daemon's own action runner (the host batch on
// a pool thread with one of up to four host sockets, the pod batch opened, run and closed in
// one pool hop), and parks a detached host end for a reaper as knit does, with no validation,
// plan, IPAM, records or logging. What knit takes beyond this contender is its own logic.
// Usage: node addon-server.js <socket path> <bridge> <reap group>; prints "ready" once bound,
// exits on SIGTERM/EOF.
import * as grpc from '@grpc/grpc-js';
import { floorService } from './proto.js';
import { serveChild } from './child-server.js';
import { DaemonActionRunner } from '../../src/daemon/action-runner.js';

const [socket, bridge, groupArg] = process.argv.slice(2);
if (!socket || !bridge || !groupArg) {
  console.error('usage: addon-server <socket path> <bridge> <reap group>');
  process.exit(2);
}
const group = Number(groupArg);
// The daemon's own runner: up to four host sockets, a pod batch in one pool hop.
const runner = new DaemonActionRunner();

interface FloorAttach { sandbox_id: string; netns_path: string; host_link: string; ifname: string; address: string; gateway: string }
interface FloorDetach { sandbox_id: string; host_link: string }

async function attach(r: FloorAttach): Promise<object> {
  await runner.runOps(undefined, [
    { op: 'link.add', kind: 'veth', name: r.host_link, mtu: 1500, master: bridge, up: true, peer: { name: r.ifname, netns: r.netns_path } },
  ]);
  await runner.runOps(r.netns_path, [
    { op: 'link.set', link: r.ifname, up: true },
    { op: 'addr.add', link: r.ifname, address: r.address },
    { op: 'route.add', dst: 'default', gateway: r.gateway },
  ]);
  return { host_link: r.host_link, address: r.address };
}

let timer: NodeJS.Timeout | undefined;
let reaping = false;
let again = false;
/** After a park: the reap group is deleted 25 ms later, one request for every end parked
 * meanwhile, as knit's reaper does (src/core/reaper.ts). */
function kick(): void {
  timer ??= setTimeout(() => {
    timer = undefined;
    reap();
  }, 25);
}

function reap(): void {
  if (reaping) {
    again = true;
    return;
  }
  reaping = true;
  void runner
    .runOps(undefined, [{ op: 'link.delGroup', group, ignoreMissing: true }])
    .catch((err: Error) => console.error(`addon-server: reap: ${err.message}`))
    .finally(() => {
      reaping = false;
      if (again) {
        again = false;
        kick();
      }
    });
}

async function detach(r: FloorDetach): Promise<object> {
  await runner.runOps(undefined, [{ op: 'link.set', link: r.host_link, up: false, group }]);
  kick();
  return {};
}

function unary<Req>(fn: (r: Req) => Promise<object>): grpc.handleUnaryCall<Req, object> {
  return (call, done) => fn(call.request).then((res) => done(null, res), (err: Error) => done({ code: grpc.status.INTERNAL, details: err.message }));
}

const server = new grpc.Server({ 'grpc.enable_channelz': 0 }); // knit's transport settings
server.addService(floorService().service, { Attach: unary(attach), Detach: unary(detach) });
serveChild(server, socket, 'addon-server');
