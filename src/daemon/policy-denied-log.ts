// Denied packets as JSON lines (networkPolicy.logDenied; docs/network-policy.md, "Denied flows
// in a log"): the table's group chains log what they drop to an nflog group, behind one
// rate limit; this reads that group (src/net/nflog.ts) and writes one line per flow, naming
// the pods at both ends and the chain and policies that denied it, to a file or knit's log.
// Loaded only when logDenied is set.
import { createWriteStream, mkdirSync, type WriteStream } from 'node:fs';
import path from 'node:path';
import type { Logger } from 'pino';
import { NflogReader, type NflogEvent } from '../net/nflog.js';
import { deniedLine, flowKey, parseIpPacket, RecentFlows } from '../policy/denied.js';
import type { PolicyRuleset } from '../policy/compile.js';
import type { NetworkPolicySettings } from '../config/index.js';

/** Bytes of each packet the kernel copies: an IPv6 header, extension headers and the ports. */
const COPY_RANGE = 128;

export interface DeniedLogLookups {
  /** The ruleset last applied: its chains name the policies. */
  ruleset(): PolicyRuleset | undefined;
  /** "namespace/name" of the pod at an address, if any. */
  podAt(ip: string): string | undefined;
}

export class DeniedLog {
  private readonly recent = new RecentFlows();
  private overruns = 0;

  private constructor(
    private readonly reader: NflogReader | undefined,
    private readonly out: WriteStream | undefined,
    private readonly log: Logger,
  ) {}

  /** Binds the group in the daemon's netns. When it cannot (another process holds the group),
   * says so in the log and reads nothing: the table still drops and counts. */
  static open(settings: NonNullable<NetworkPolicySettings['logDenied']>, log: Logger, lookups: DeniedLogLookups): DeniedLog {
    let out: WriteStream | undefined;
    if (settings.file) {
      mkdirSync(path.dirname(settings.file), { recursive: true, mode: 0o750 });
      out = createWriteStream(settings.file, { flags: 'a', mode: 0o640 });
      out.on('error', (err) => log.error({ err: err.message, file: settings.file }, 'NetworkPolicy: cannot write the denied log'));
    }
    let self: DeniedLog | undefined;
    try {
      const reader = new NflogReader(undefined, settings.group, COPY_RANGE, (events) => self?.take(events, lookups));
      reader.unref();
      self = new DeniedLog(reader, out, log);
    } catch (err) {
      const e = err as Error & { code?: string };
      const why = e.code === 'EPERM' ? `another process holds nflog group ${settings.group} in this netns` : e.message;
      log.error({ err: why, group: settings.group }, 'NetworkPolicy: denied packets cannot be logged (networkPolicy.logDenied)');
      self = new DeniedLog(undefined, out, log);
    }
    return self;
  }

  private take(events: NflogEvent[], lookups: DeniedLogLookups): void {
    const lines: string[] = [];
    for (const e of events) {
      if (e.type === 'overrun') {
        if (this.overruns++ % 100 === 0) this.log.warn({ overruns: this.overruns }, 'NetworkPolicy: the kernel dropped denied-log messages (socket buffer full)');
        continue;
      }
      if (e.type === 'error') {
        this.log.error({ code: e.code }, 'NetworkPolicy: the denied log stopped reading');
        continue;
      }
      const pkt = e.family ? parseIpPacket(e.family, e.payload) : undefined;
      if (!pkt || !this.recent.fresh(`${e.prefix} ${flowKey(pkt)}`, e.timeMs)) continue;
      const line = deniedLine(pkt, e.timeMs, e.prefix, lookups.ruleset(), (ip) => lookups.podAt(ip));
      if (this.out) lines.push(JSON.stringify(line));
      else this.log.info({ denied: line }, 'NetworkPolicy denied');
    }
    if (lines.length) this.out!.write(`${lines.join('\n')}\n`);
  }

  async close(): Promise<void> {
    this.reader?.close();
    if (this.out) await new Promise<void>((resolve) => this.out!.end(resolve));
  }
}
