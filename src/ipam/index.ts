// Public surface of src/ipam: the Ipam class, its input/output shapes, and the IP helpers.
export { Ipam, type Allocation, type NetworkPools } from './ipam.js';
export type { PoolConfig, PoolUsage } from './pool.js';
export * from './ip.js';
