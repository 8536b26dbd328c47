// DNS configs merged: the pod's resolver settings are the request's and its networks', and a
// VM guest's are the request's and its own network's (runtimes/common/guest-config.ts).

/** A resolver configuration (resolv.conf's nameservers, search domains and options). */
export interface DnsConfig {
  nameservers: string[];
  search: string[];
  options: string[];
  domain?: string;
}

/** Merges DNS configs, earlier first: nameservers, search domains and options each once, in
 * order; the first domain given. */
export function mergeDns(configs: (DnsConfig | undefined)[]): DnsConfig | undefined {
  const given = configs.filter((c): c is DnsConfig => !!c);
  if (!given.length) return undefined;
  const once = (lists: string[][]) => [...new Set(lists.flat())];
  const domain = given.find((c) => c.domain)?.domain;
  return {
    nameservers: once(given.map((c) => c.nameservers)),
    search: once(given.map((c) => c.search)),
    options: once(given.map((c) => c.options)),
    ...(domain ? { domain } : {}),
  };
}
