// Public surface of src/config.
export { loadConfig, readConfigFile, parseConfigText, validateConfig, defaultConfig, ConfigError, type LoadedConfig, type LocatedIssue } from './load.js';
export { watchConfig, type WatchOptions } from './watch.js';
export { diffNetworks, sameConfig, canonicalJson, type NetworkDiff, type NetworkChange } from './diff.js';
export type { KnitConfig, NetworkConfig, PoolSettings, RouteSettings, DnsSettings, ClusterSettings, DraSettings, NetworkPolicySettings, SecondaryNetworksSettings } from './resolve.js';
export { DEFAULT_SUBNET_V4, SUGGESTED_SUBNET_V6, LOG_LEVELS, NODE_SUBNET } from './schema.js';
export { parseConfigText as parseConfigDocument, formatKeyPath, ConfigSyntaxError } from './config-text.js';
