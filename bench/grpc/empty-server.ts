// A trivial grpc-js server on a unix socket, run as a child process like a daemon would be.
// Usage: node empty-server.js <socket path> [server options as JSON]; prints "ready" once
// bound, exits on SIGTERM/EOF.
import { rmSync } from 'node:fs';
import * as grpc from '@grpc/grpc-js';
import { emptyService } from './proto.js';

const socket = process.argv[2];
if (!socket) {
  console.error('usage: empty-server <socket path>');
  process.exit(2);
}
rmSync(socket, { force: true });
// The same transport settings as knit's server (src/api/server.ts), so the empty call is the
// transport knit pays; more options to try come as JSON.
const server = new grpc.Server({ 'grpc.enable_channelz': 0, ...(JSON.parse(process.argv[3] ?? '{}') as grpc.ServerOptions) });
server.addService(emptyService().service, {
  Call: (_call: grpc.ServerUnaryCall<object, object>, done: grpc.sendUnaryData<object>) => done(null, {}),
});
server.bindAsync(`unix://${socket}`, grpc.ServerCredentials.createInsecure(), (err) => {
  if (err) {
    console.error(`empty-server: bind ${socket}: ${err.message}`);
    process.exit(1);
  }
  console.log('ready');
});
const stop = () => {
  server.forceShutdown();
  process.exit(0);
};
process.on('SIGTERM', stop);
process.stdin.on('end', stop); // the harness dying closes our stdin
process.stdin.resume();
