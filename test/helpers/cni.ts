// CNI chain tests: a daemon running in its own "host" netns (so what bridge, portmap, firewall
// and bandwidth do to the host — links, iptables chains, ifb devices — stays in there and goes
// with it), conflists of Debian's plugins, and tiny failing or hanging plugins written as
// shell scripts into the test's own plugin directory.
import { chmodSync, existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { execFileSync } from 'node:child_process';

export const DEBIAN_PLUGINS = '/usr/lib/cni';

/** host-local with its leases under the test's dir (never /var/lib/cni/networks); subnet6
 * makes it dual-stack. */
export const hostLocal = (dataDir: string, subnet: string, gateway?: string, subnet6?: string) => ({
  type: 'host-local', dataDir,
  ranges: [[{ subnet, ...(gateway && { gateway }) }], ...(subnet6 ? [[{ subnet: subnet6 }]] : [])],
  routes: [{ dst: '0.0.0.0/0' }],
});

export function conflist(name: string, plugins: object[], cniVersion = '1.0.0') {
  return { cniVersion, name, plugins };
}

/** A plugin that answers VERSION, passes prevResult through on ADD (after `onAdd`, shell), and
 * logs each command it got to <dir>/<name>.log. */
export function scriptPlugin(dir: string, name: string, onAdd: string): string {
  mkdirSync(dir, { recursive: true });
  const file = path.join(dir, name);
  writeFileSync(file, `#!/bin/sh
conf=$(cat)
echo "$CNI_COMMAND $CNI_CONTAINERID" >> ${dir}/${name}.log
case "$CNI_COMMAND" in
VERSION) echo '{"cniVersion":"1.0.0","supportedVersions":["0.4.0","1.0.0"]}'; exit 0;;
ADD) ${onAdd}
  echo "$conf" | python3 -c 'import json,sys; c=json.load(sys.stdin); r=c["prevResult"]; r["cniVersion"]=c["cniVersion"]; print(json.dumps(r))'; exit 0;;
*) exit 0;;
esac
`);
  chmodSync(file, 0o755);
  return file;
}

/** The commands a script plugin saw, in order. */
export const scriptLog = (dir: string, name: string): string[] =>
  existsSync(path.join(dir, `${name}.log`)) ? readFileSync(path.join(dir, `${name}.log`), 'utf8').trim().split('\n') : [];

/** The libcni cache files (results/) under a cache dir. */
export const cacheEntries = (cacheDir: string): string[] => (existsSync(path.join(cacheDir, 'results')) ? readdirSync(path.join(cacheDir, 'results')).sort() : []);

/** host-local's leases (one file per address) in its dataDir for network `name`. */
export const leases = (dataDir: string, name: string): string[] =>
  existsSync(path.join(dataDir, name)) ? readdirSync(path.join(dataDir, name)).filter((f) => /^\d+\.\d+\.\d+\.\d+$/.test(f)).sort() : [];

export function nftRuleset(netns: string): any[] {
  return JSON.parse(execFileSync('ip', ['netns', 'exec', netns, '/usr/sbin/nft', '-j', 'list', 'ruleset'], { encoding: 'utf8' })).nftables;
}

export function tcJson(args: string[], netns: string): any[] {
  return JSON.parse(execFileSync('ip', ['netns', 'exec', netns, 'tc', '-j', ...args], { encoding: 'utf8' }) || '[]');
}

/** The plugin config a runtime hands knit-cni for a daemon under test (its CNI socket and
 * delete queue in the daemon's dir), as a 1.0.0 conflist entry of type "knit". */
export function knitShimConf(prefix: string, daemonDir: string, extra: object = {}) {
  return {
    cniVersion: '1.0.0',
    name: `${prefix}cni`,
    type: 'knit',
    network: `${prefix}net`,
    socket: daemonDir + '/cni.sock',
    deleteQueue: daemonDir + '/cni-delete-queue',
    timeoutSeconds: 20,
    ...extra,
  };
}
