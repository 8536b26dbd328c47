// Human-readable views of knit.v1 results and records.
import { table } from './format.js';

type Wire = any;

const ipsOf = (r: Wire, index: number): string[] =>
  (r.ips ?? []).filter((ip: Wire) => ip.interface === index).map((ip: Wire) => ip.address);

export function renderResult(r: Wire): string {
  const lines: string[] = [];
  const rows = (r.interfaces ?? []).map((i: Wire, index: number) => [
    i.name,
    i.sandbox ? 'sandbox' : 'host',
    i.kind || '-',
    i.mac || '-',
    i.mtu ? String(i.mtu) : '-',
    i.host_name || '-',
    ipsOf(r, index).join(', ') || '-',
  ]);
  if (rows.length) lines.push(table(['INTERFACE', 'SIDE', 'KIND', 'MAC', 'MTU', 'HOST DEVICE', 'ADDRESSES'], rows));
  const routes = (r.routes ?? []).map((rt: Wire) =>
    [rt.dst, rt.gw ? `via ${rt.gw}` : '', rt.table ? `table ${rt.table}` : '', rt.priority ? `metric ${rt.priority}` : '', rt.mtu ? `mtu ${rt.mtu}` : '']
      .filter(Boolean)
      .join(' '),
  );
  if (routes.length) lines.push(`routes: ${routes.join('; ')}`);
  const dns = r.dns;
  if (dns && (dns.nameservers?.length || dns.search?.length)) {
    lines.push(`dns: ${[...(dns.nameservers ?? [])].join(' ')}${dns.search?.length ? ` search ${dns.search.join(' ')}` : ''}`);
  }
  return lines.join('\n');
}

export function podOf(req: Wire): string {
  if (!req?.pod_name) return '-';
  return req.pod_namespace ? `${req.pod_namespace}/${req.pod_name}` : req.pod_name;
}

/** Sandbox-side addresses without prefix length, in result order. */
export function sandboxAddresses(r: Wire | null): string[] {
  if (!r) return [];
  return (r.ips ?? [])
    .filter((ip: Wire) => r.interfaces?.[ip.interface]?.sandbox)
    .map((ip: Wire) => String(ip.address).split('/')[0]);
}

export const lower = (enumName: string | undefined) => (enumName ?? '').toLowerCase().replace(/^runtime_unspecified$/, 'runc');
