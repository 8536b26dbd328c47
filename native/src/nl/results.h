// What ops report back, as plain C++ (converted to JS on the JS thread by to_js.cc).
// Field meanings follow the LinkInfo/AddrInfo/... interfaces in src/net/ops.ts.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace knit::nl {

struct VfInfo {
  uint32_t vf = 0;
  std::string mac;
  uint32_t vlan = 0;
  uint32_t qos = 0;
  std::string vlanProto;  // "" when the kernel did not say
  std::optional<bool> spoofchk;
  std::optional<bool> trust;
  std::optional<uint32_t> minTxRate;
  std::optional<uint32_t> maxTxRate;
  std::string linkState;  // "" when absent
};

// A VXLAN device's own settings (IFLA_INFO_DATA), read so a VTEP whose VNI, port, local address
// or underlay device no longer matches the config can be found and made again.
struct VxlanInfo {
  uint32_t vni = 0;
  uint16_t port = 0;
  std::string local;
  std::optional<uint32_t> dev;
};

// A bridge's own settings knit reads back.
struct BridgeInfo {
  bool nfCallIptables = false;
  bool nfCallIp6tables = false;
};

struct LinkInfo {
  uint32_t index = 0;
  std::string name;
  std::string kind;
  uint32_t mtu = 0;
  std::string mac;
  bool up = false;
  bool lowerUp = false;
  std::string operstate;
  std::optional<uint32_t> master;
  std::optional<std::string> alias;
  uint32_t group = 0;
  std::optional<uint32_t> txqlen;
  std::optional<uint32_t> parentIndex;
  std::optional<int32_t> linkNetnsId;
  std::optional<uint32_t> numTxQueues;
  std::optional<std::vector<VfInfo>> vfs;
  std::optional<VxlanInfo> vxlan;
  std::optional<BridgeInfo> bridge;
};

struct AddrInfo {
  uint32_t index = 0;
  int family = 4;
  std::string address;
  uint32_t prefixLen = 0;
  std::string peer;
  std::string scope;
  std::vector<std::string> flags;
};

struct RouteInfo {
  int family = 4;
  std::string dst;
  std::string gateway;
  std::optional<uint32_t> index;
  uint32_t table = 0;
  std::optional<uint32_t> metric;
  std::string scope;
  std::string protocol;
  std::string type;
  std::optional<uint32_t> mtu;
  bool onlink = false;
  std::string src;
};

struct NeighInfo {
  uint32_t index = 0;
  int family = 4;
  std::string address;
  std::string lladdr;
  std::vector<std::string> state;
  bool proxy = false;
};

// A bridge or VXLAN forwarding database entry (AF_BRIDGE neighbour).
struct FdbInfo {
  uint32_t index = 0;
  std::string mac;
  std::string dst;  // VXLAN: the remote VTEP's address; "" on a bridge
  std::vector<std::string> state;
  bool self = false;
  std::optional<uint32_t> master;
};

struct QdiscInfo {
  uint32_t index = 0;
  std::string kind;
  std::string handle;
  std::string parent;
  // tbf only: bytes per second and the queue's byte limit.
  std::optional<uint64_t> rate;
  std::optional<uint32_t> limit;
};

struct FilterInfo {
  uint32_t index = 0;
  std::string kind;
  uint32_t prio = 0;
  uint32_t protocol = 0;
  std::optional<uint32_t> redirectTo;
};

struct OpResult {
  bool skipped = false;
  uint32_t index = 0;  // 0: none known
  std::optional<LinkInfo> link;
  std::optional<std::vector<LinkInfo>> links;
  std::optional<std::vector<AddrInfo>> addrs;
  std::optional<std::vector<RouteInfo>> routes;
  std::optional<std::vector<NeighInfo>> neighs;
  std::optional<std::vector<FdbInfo>> fdb;
  std::optional<std::vector<QdiscInfo>> qdiscs;
  std::optional<std::vector<FilterInfo>> filters;
  std::optional<std::string> value;
  std::optional<std::vector<int>> fds;
};

}  // namespace knit::nl
