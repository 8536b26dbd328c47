// The sandbox netns a request names must be a network namespace, and not the host's: said as
// an INVALID_ARGUMENT about netns_path, which is what the caller got wrong. Whatever stops knit
// from opening the path (missing, EACCES, a component longer than NAME_MAX, another kind of
// namespace) is the caller's path, never a fault of knit's.
import { lstatSync, readlinkSync } from 'node:fs';
import path from 'node:path';
import { identifyNetns, isHostNetnsId, NetnsError, sameNetns } from '../net/netns.js';
import { KnitError, quote } from '../base/errors.js';
import { netnsPathProblem } from '../api/rules.js';
import type { NetnsPort, NetnsRelation } from '../core/ports.js';
import type { NetnsIdentity } from '../core/record.js';
import { goneNetnsChecker } from './netns-liveness.js';

export class NetnsChecker implements NetnsPort {
  readonly goneChecker = goneNetnsChecker;

  identify(file: string): NetnsIdentity {
    const problem = symlinkProblem(file);
    if (problem) throw KnitError.invalid('netns_path', problem);
    try {
      const id = identifyNetns(file, { rejectHost: true });
      return { path: file, dev: id.dev, ino: id.ino, ...(id.id !== undefined && { id: id.id }) };
    } catch (err) {
      if (!(err instanceof NetnsError)) throw err;
      const why =
        err.reason === 'missing' ? `${quote(file)} does not exist`
        : err.reason === 'host-netns' ? `${quote(file)} is the host's network namespace; knit attaches sandboxes only`
        : err.reason === 'not-netns' ? err.message.replace(file, quote(file))
        : `${quote(file)} cannot be opened as a network namespace: ${err.message.replace(/^.*: /, '')}`;
      throw KnitError.invalid('netns_path', why);
    }
  }

  relation(file: string, sandbox: NetnsIdentity): NetnsRelation {
    // A symlink to /proc/1/ns/net is the host's even where pid 1's namespace cannot be read.
    if (symlinkProblem(file)) return 'host';
    let id;
    try {
      id = identifyNetns(file);
    } catch (err) {
      if (!(err instanceof NetnsError)) throw err;
      // Nothing there, or a file that is no namespace (what `umount` leaves): no live namespace
      // stands there. Anything else (EACCES, say) may hide one.
      return err.reason === 'missing' || err.reason === 'not-netns' ? 'none' : 'unknown';
    }
    if (sameNetns(id, sandbox)) return 'same';
    return isHostNetnsId(id) ? 'host' : 'other';
  }
}

/**
 * A symlink (a chain of them) whose target is a path the textual rule refuses, the host's
 * /proc/1/ns/net say, is refused by that name. The kernel's own links (/proc/<pid>/ns/net reads
 * "net:[4026531840]") name no path and are followed by identify as usual.
 */
function symlinkProblem(file: string): string | undefined {
  let current = file;
  for (let hops = 0; hops < 40; hops++) {
    let target: string;
    try {
      if (!lstatSync(current).isSymbolicLink()) return undefined;
      target = readlinkSync(current);
    } catch {
      return undefined; // identify says what is wrong with it
    }
    if (!target.startsWith('/') && !target.startsWith('.') && target.includes(':[')) return undefined;
    current = path.resolve(path.dirname(current), target);
    const problem = netnsPathProblem(current);
    if (problem) return `${quote(file)} is a symbolic link: ${problem}`;
  }
  return `${quote(file)} is a chain of more than 40 symbolic links`;
}
