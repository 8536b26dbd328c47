// The label an attach carries when knit added interfaces for the pod's DRA devices: their
// names, so a CNI DEL of the pod's CNI interface knows they are not other CNI attachments and
// detaches the whole sandbox (giving the devices back). Kept apart so the CNI frontend can read
// it without loading the DRA driver.
export const DRA_INTERFACES_LABEL = 'dra.knit.dev/interfaces';

export function draInterfaceNames(labels: Record<string, string>): Set<string> {
  return new Set((labels[DRA_INTERFACES_LABEL] ?? '').split(',').filter(Boolean));
}
