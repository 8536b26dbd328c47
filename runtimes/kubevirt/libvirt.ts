// The libvirt <interface> for a tap knit made: type='ethernet' with <target managed='no'>, so
// libvirt opens the existing device by name (KubeVirt's tapBindingOptions plus the launcher's
// TapLibvirtSpecGenerator). A vhost driver element with queues only for a multi-queue tap:
// libvirt then opens with IFF_MULTI_QUEUE, which must match the device.
export function libvirtInterfaceXml(tap: string, mac: string, mtu: number, queues: number): { target: string; interface: string } {
  const target = `<target dev='${tap}' managed='no'/>`;
  const lines = [
    "<interface type='ethernet'>",
    `  <mac address='${mac}'/>`,
    `  ${target}`,
    "  <model type='virtio'/>",
    `  <mtu size='${mtu}'/>`,
    ...(queues > 1 ? [`  <driver name='vhost' queues='${queues}'/>`] : []),
    '</interface>',
  ];
  return { target, interface: lines.join('\n') };
}

/** <hostdev> for libvirt: the function by address, left bound by knit (managed='no'). */
export function libvirtHostdevXml(bdf: string, alias: string): string {
  const [domain, bus, slotFn] = bdf.split(':');
  const [slot, fn] = slotFn!.split('.');
  return [
    "<hostdev mode='subsystem' type='pci' managed='no'>",
    `  <source><address domain='0x${domain}' bus='0x${bus}' slot='0x${slot}' function='0x${fn}'/></source>`,
    `  <alias name='ua-${alias}'/>`,
    '</hostdev>',
  ].join('\n');
}
