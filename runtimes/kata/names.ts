// Kata's device names (createNetworkInterfacePair, virtcontainers/network.go): the endpoint's
// index in the sandbox picks tap<N>_kata, for the tcfilter tap and the macvtap alike.
export const kataTapName = (index: number) => `tap${index}_kata`;
