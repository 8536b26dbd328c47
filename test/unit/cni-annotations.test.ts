// runtimeConfig as runtimes send it: libcni's camelCase keys (podman) and go-cni's untagged Go
// field names (containerd's CRI plugin), both read as Go plugins read them.
import test from 'ava';
import { podSettings } from '../../src/cni-frontend/annotations.js';

test('portMappings and bandwidth: camelCase and Go field names give the same request', (t) => {
  const camel = podSettings({ runtimeConfig: { portMappings: [{ hostPort: 8080, containerPort: 80, protocol: 'tcp', hostIP: '10.185.0.1' }], bandwidth: { ingressRate: 8, ingressBurst: 9, egressRate: 10, egressBurst: 11 } } });
  const goNames = podSettings({ runtimeConfig: { portMappings: [{ HostPort: 8080, ContainerPort: 80, Protocol: 'tcp', HostIP: '10.185.0.1' }], bandwidth: { IngressRate: 8, IngressBurst: 9, EgressRate: 10, EgressBurst: 11 } } });
  t.deepEqual(camel.portMappings, [{ protocol: 'TCP', container_port: 80, host_port: 8080, host_ip: '10.185.0.1' }]);
  t.deepEqual(goNames.portMappings, camel.portMappings);
  t.deepEqual(goNames.bandwidth, camel.bandwidth);
  t.deepEqual(camel.bandwidth, { ingress_rate: 8, ingress_burst: 9, egress_rate: 10, egress_burst: 11 });
});
