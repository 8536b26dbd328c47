// Unary calls through the C-core gRPC client (bench/grpc/ccore-client.py on Debian's
// python3-grpcio): what a Go or C++ caller of knit pays, where grpc-js is only one client.
// The request is encoded here with the service's own serializer and sent as bytes; the time
// is the one measured around the call inside that client, so the pipe to it is not counted.
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { LineProcess } from './line-process.js';

const script = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..', 'bench', 'grpc', 'ccore-client.py');
// Debian's interpreter: its dist-packages hold python3-grpcio, whatever python3 is on PATH.
const PYTHON = '/usr/bin/python3';

export class CCoreClient {
  private readonly proc: LineProcess;

  constructor(socket: string) {
    this.proc = new LineProcess('C-core gRPC client', PYTHON, [script, socket]);
  }

  get pid(): number | undefined {
    return this.proc.pid;
  }

  /** One call of `/package.Service/Method`; resolves with the client-side time in ms. */
  async call(method: string, body: Buffer): Promise<number> {
    const answer = await this.proc.request(`${method} ${body.toString('hex')}`);
    const [word, ...rest] = answer.split(' ');
    if (word !== 'ok') throw new Error(`${method} through the C-core client: ${rest.join(' ')}`);
    return Number(rest[0]);
  }

  close(): Promise<void> {
    return this.proc.close();
  }
}
