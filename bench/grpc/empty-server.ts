// A trivial grpc-js server on a unix socket, run as a child process like a daemon would be.
// Usage: node empty-server.js <socket path> [server options as JSON]; prints "ready" once
// bound, exits on SIGTERM/EOF.
import * as grpc from '@grpc/grpc-js';
import { emptyService } from './proto.js';
import { serveChild } from './child-server.js';

const socket = process.argv[2];
if (!socket) {
  console.error('usage: empty-server <socket path>');
  process.exit(2);
}
// The same transport settings as knit's server (src/api/server.ts), so the empty call is the
// transport knit pays; more options to try come as JSON.
const server = new grpc.Server({ 'grpc.enable_channelz': 0, ...(JSON.parse(process.argv[3] ?? '{}') as grpc.ServerOptions) });
server.addService(emptyService().service, {
  Call: (_call: grpc.ServerUnaryCall<object, object>, done: grpc.sendUnaryData<object>) => done(null, {}),
});
serveChild(server, socket, 'empty-server');
