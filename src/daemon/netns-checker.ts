// The sandbox netns a request names must be a network namespace, and not the host's: said as
// an INVALID_ARGUMENT about netns_path, which is what the caller got wrong.
import { identifyNetns, NetnsError } from '../net/netns.js';
import { KnitError } from '../base/errors.js';
import type { NetnsPort } from '../core/ports.js';
import type { NetnsIdentity } from '../core/record.js';

export class NetnsChecker implements NetnsPort {
  identify(path: string): NetnsIdentity {
    try {
      const id = identifyNetns(path, { rejectHost: true });
      return { path, dev: id.dev, ino: id.ino };
    } catch (err) {
      if (err instanceof NetnsError) {
        const why = {
          missing: `${path} does not exist`,
          'not-netns': err.message,
          'host-netns': `${path} is the host's network namespace; knit attaches sandboxes only`,
        }[err.reason as string];
        if (why) throw KnitError.invalid('netns_path', why);
      }
      throw err;
    }
  }
}
