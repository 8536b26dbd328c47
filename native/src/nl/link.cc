// Links: RTM_NEWLINK / RTM_DELLINK / RTM_GETLINK.
#include <errno.h>
#include <linux/if.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <linux/veth.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>

#include "nl/families.h"
#include "netns.h"
#include "nl/inet.h"

namespace knit::nl {

namespace {

std::vector<uint8_t> Mac(const Fields& f, const char* key) {
  std::vector<uint8_t> mac;
  if (!ParseMac(f.Str(key), &mac)) f.RangeFail(key, "'" + f.Str(key) + "' is not a MAC address (aa:bb:cc:dd:ee:ff)");
  if (mac[0] & 1) f.RangeFail(key, "'" + f.Str(key) + "' is a multicast MAC; a link needs a unicast one");
  return mac;
}

std::string AliasField(const Fields& f, const char* key) {
  std::string alias = f.Str(key);
  if (alias.size() >= IFALIASZ) f.RangeFail(key, "alias is " + std::to_string(alias.size()) + " bytes; at most 255");
  return alias;
}

// Sets a link's alias by ifindex on the given socket; with noLinkLocal, in the same request,
// IPv6 address generation off (addrgenmode none), which the kernel refuses in a create.
int SetAlias(Socket& socket, uint32_t index, const std::string& alias, OpError* err, bool noLinkLocal = false) {
  Builder b(RTM_SETLINK, kAck);
  ifinfomsg ifi{};
  ifi.ifi_index = static_cast<int>(index);
  b.Struct(&ifi, sizeof ifi);
  b.Attr(IFLA_IFALIAS, alias.data(), alias.size());
  if (noLinkLocal) {
    size_t af = b.Begin(IFLA_AF_SPEC);
    size_t inet6 = b.Begin(AF_INET6);
    b.U8(IFLA_INET6_ADDR_GEN_MODE, IN6_ADDR_GEN_MODE_NONE);
    b.End(inet6);
    b.End(af);
  }
  int rc = socket.Transact(std::move(b.Bytes()), nullptr, &err->extack);
  if (rc < 0) err->context = "set alias '" + alias + "'" + (noLinkLocal ? " and addrgenmode none" : "") + " on new link " + std::to_string(index);
  return rc;
}

// A veth peer made in another netns is only reachable by a socket in that netns. IFLA_TARGET_
// NETNSID would not do: RTM_SETLINK finds the link by ifindex in the socket's own netns and
// reads the attribute as "move the link there" (docs/peer-retire.md).
int SetAliasIn(const std::string& netns, uint32_t index, const std::string& alias, OpError* err) {
  OpError open;
  int nsfd = OpenNetns(netns, &open);
  if (nsfd < 0) {
    err->context = open.context.empty() ? "open netns " + netns : open.context;
    return nsfd;
  }
  Socket peer;
  int rc = peer.Open(nsfd);
  close(nsfd);
  if (rc < 0) {
    err->context = "open netlink socket in " + netns;
    return rc;
  }
  return SetAlias(peer, index, alias, err);
}

std::string NetnsPath(const Fields& f, const char* key) {
  std::string p = f.Str(key);
  if (p.empty() || p[0] != '/') f.RangeFail(key, "netns must be an absolute path (e.g. /run/netns/NAME), got '" + p + "'");
  return p;
}

// IFLA_IFALIAS without a NUL, as iproute2 sends it: the kernel stores exactly len bytes, and an
// empty payload clears the alias.
void PutAlias(Builder& b, const Fields& f, const char* key) {
  std::string alias = f.Str(key);
  if (alias.size() >= IFALIASZ) f.RangeFail(key, "alias is " + std::to_string(alias.size()) + " bytes; at most 255");
  b.Attr(IFLA_IFALIAS, alias.data(), alias.size());
}

// Attributes every link kind accepts at creation.
void PutCommon(RequestBuilder& r, const Fields& f) {
  r.b.Str(IFLA_IFNAME, f.IfName("name"));
  if (auto mtu = f.OptU32("mtu", 68, 65535)) r.b.U32(IFLA_MTU, *mtu);
  if (f.Has("mac")) {
    auto mac = Mac(f, "mac");
    r.b.Attr(IFLA_ADDRESS, mac.data(), mac.size());
  }
  if (auto q = f.OptU32("txqlen")) r.b.U32(IFLA_TXQLEN, *q);
  if (auto g = f.OptU32("group")) r.b.U32(IFLA_GROUP, *g);
  if (f.Has("master")) r.LinkAttr(IFLA_MASTER, f.Link("master"), f.PathOf("master"));
}

void PutVethPeer(RequestBuilder& r, const Fields& p, const char* nameKey) {
  size_t peer = r.b.Begin(VETH_INFO_PEER);
  ifinfomsg pi{};
  r.b.Struct(&pi, sizeof pi);
  r.b.Str(IFLA_IFNAME, p.IfName(nameKey));
  if (auto mtu = p.OptU32("mtu", 68, 65535)) r.b.U32(IFLA_MTU, *mtu);
  if (p.Has("mac")) {
    auto mac = Mac(p, "mac");
    r.b.Attr(IFLA_ADDRESS, mac.data(), mac.size());
  }
  if (p.Has("netns")) r.NetnsFdAttr(IFLA_NET_NS_FD, NetnsPath(p, "netns"), p.PathOf("netns"));
  r.b.End(peer);
}

uint32_t MacvlanMode(const std::string& m) {
  if (m == "private") return MACVLAN_MODE_PRIVATE;
  if (m == "vepa") return MACVLAN_MODE_VEPA;
  if (m == "passthru") return MACVLAN_MODE_PASSTHRU;
  if (m == "source") return MACVLAN_MODE_SOURCE;
  return MACVLAN_MODE_BRIDGE;
}

void PutVxlan(RequestBuilder& r, const Fields& f) {
  r.b.U32(IFLA_VXLAN_ID, f.U32("vni", 0, (1u << 24) - 1));
  // The kernel's own default port is the pre-IANA 8472; knit uses 4789 unless told.
  uint16_t port = static_cast<uint16_t>(f.OptU32("port", 1, 65535).value_or(4789));
  r.b.U16(IFLA_VXLAN_PORT, htons(port));
  for (const char* key : {"local", "remote"}) {
    if (!f.Has(key)) continue;
    IpAddr ip;
    if (!ParseIp(f.Str(key), &ip)) f.RangeFail(key, "'" + f.Str(key) + "' is not an IP address");
    bool v6 = ip.family == AF_INET6;
    uint16_t type = std::string(key) == "local" ? (v6 ? IFLA_VXLAN_LOCAL6 : IFLA_VXLAN_LOCAL) : (v6 ? IFLA_VXLAN_GROUP6 : IFLA_VXLAN_GROUP);
    r.b.Attr(type, ip.bytes, ip.Len());
  }
  if (f.Has("dev")) r.LinkAttr(IFLA_VXLAN_LINK, f.Link("dev"), f.PathOf("dev"));
  if (auto learning = f.OptBool("learning")) r.b.U8(IFLA_VXLAN_LEARNING, *learning ? 1 : 0);
}

// Whether bridged IPv4 and IPv6 pass the inet hooks (br_netfilter), for this bridge alone:
// the per-bridge switch `ip link set BR type bridge nf_call_iptables 1` sets, where the
// net.bridge.bridge-nf-call-* sysctls would turn it on for every bridge of the netns.
void PutBridgeNetfilter(Builder& b, bool on) {
  b.U8(IFLA_BR_NF_CALL_IPTABLES, on ? 1 : 0);
  b.U8(IFLA_BR_NF_CALL_IP6TABLES, on ? 1 : 0);
}

PreparedOp Single(const char* name, Request req) {
  PreparedOp op;
  op.name = name;
  op.requests.push_back(std::move(req));
  return op;
}

}  // namespace

namespace {

// The RTM_NEWLINK that creates the link, up if `up`; a veth's peer takes its name from
// peer[peerNameKey].
Request LinkAddRequest(const Fields& f, const std::string& kind, const char* peerNameKey, bool up) {
  // NLM_F_ECHO: the kernel answers with the new link, which tells us its ifindex for free.
  RequestBuilder r(RTM_NEWLINK, kAck | NLM_F_CREATE | NLM_F_EXCL | NLM_F_ECHO, ReplyKind::Echo);
  ifinfomsg ifi{};
  if (up) ifi.ifi_flags = ifi.ifi_change = IFF_UP;
  // A macvtap's character device is /dev/tap<ifindex>, named host-wide after an index that is
  // unique only in its netns: the caller picks one no other macvtap's node holds.
  if ((kind == "macvlan" || kind == "macvtap") && f.Has("index")) ifi.ifi_index = static_cast<int>(f.U32("index", 1, INT32_MAX));
  r.b.Struct(&ifi, sizeof ifi);
  PutCommon(r, f);
  r.echoName = f.Str("name");
  if (kind == "macvlan" || kind == "macvtap") r.LinkAttr(IFLA_LINK, f.Link("parent"), f.PathOf("parent"));

  size_t info = r.b.Begin(IFLA_LINKINFO);
  r.b.Str(IFLA_INFO_KIND, kind);
  if (kind == "veth") {
    size_t data = r.b.Begin(IFLA_INFO_DATA);
    PutVethPeer(r, f.Obj("peer"), peerNameKey);
    r.b.End(data);
  } else if (kind == "bridge") {
    const bool stpOff = f.Bool("stpOff", false);
    const auto netfilter = f.OptBool("netfilter");
    if (stpOff || netfilter) {
      size_t data = r.b.Begin(IFLA_INFO_DATA);
      if (stpOff) r.b.U32(IFLA_BR_STP_STATE, 0);
      if (netfilter) PutBridgeNetfilter(r.b, *netfilter);
      r.b.End(data);
    }
  } else if (kind == "macvlan" || kind == "macvtap") {
    size_t data = r.b.Begin(IFLA_INFO_DATA);
    auto mode = f.OptEnum("mode", {"private", "vepa", "bridge", "passthru", "source"});
    r.b.U32(IFLA_MACVLAN_MODE, MacvlanMode(mode.value_or("bridge")));
    r.b.End(data);
  } else if (kind == "vxlan") {
    size_t data = r.b.Begin(IFLA_INFO_DATA);
    PutVxlan(r, f);
    r.b.End(data);
  }
  r.b.End(info);
  return r.Done();
}

}  // namespace

PreparedOp PrepareLinkAdd(const Fields& f) {
  std::string kind = f.Enum("kind", {"veth", "bridge", "macvlan", "macvtap", "vxlan", "ifb"});
  // A link with an alias is made down and brought up after the alias is set. The kernel
  // announces a device's state change (netdev_state_change, which setting an alias calls) only
  // while the device is up, and every announcement makes IPv6 walk the netns's whole routing
  // table: on a node with 1,000 pods that walk is most of the alias request's cost
  // (bench/README.md, "Which requests grow at scale"). One more request, and no walk.
  const bool upAfterAlias = f.Has("alias") && f.Bool("up", false);
  const bool upAtCreate = f.Bool("up", false) && !upAfterAlias;
  PreparedOp op = Single("link.add", LinkAddRequest(f, kind, "name", upAtCreate));
  // A pod end's name may still be held by a detached sandbox's pod end waiting for the reaper:
  // then the peer is made under its other name, and the pod netns batch moves the old one aside
  // and renames the new one (runtimes/common/pod-veth.ts).
  if (kind == "veth" && f.Obj("peer").Has("nameIfTaken")) op.ifExists = LinkAddRequest(f, kind, "nameIfTaken", upAtCreate);
  // The name itself may be held by a host end that Detach parked under it (retire keeps it:
  // src/net/retire.ts); taking it back costs nothing unless the create meets EEXIST.
  if (f.Has("reclaimParked")) {
    Fields parked = f.Obj("reclaimParked");
    const std::string prefix = parked.Str("tagPrefix");
    if (prefix.empty()) parked.RangeFail("tagPrefix", "must not be empty: it is what makes a device knit's");
    const uint32_t group = parked.U32("group", 1, UINT32_MAX);
    const std::string name = f.Str("name");
    op.reclaimName = [name, group, prefix](RunContext& ctx, OpError* err) { return ReclaimParkedName(ctx, name, group, prefix, err); };
  }

  std::optional<std::string> alias, peerAlias, peerNetns;
  if (f.Has("alias")) alias = AliasField(f, "alias");
  const bool noLinkLocal = f.OptEnum("addrGenMode", {"none"}).has_value();
  if (noLinkLocal && !alias) f.RangeFail("addrGenMode", "is set together with the alias: give the link an alias too");
  if (kind == "veth") {
    Fields peer = f.Obj("peer");
    if (peer.Has("alias")) peerAlias = AliasField(peer, "alias");
    if (peer.Has("netns")) peerNetns = peer.Str("netns");
  }
  if (alias || peerAlias) {
    // The kernel ignores IFLA_IFALIAS when creating a link: set it right after, by ifindex.
    // addrgenmode rides with the alias: a veth end gets its link-local address only once it
    // has carrier (its peer up, later), so setting it here is in time.
    op.afterCreate = [alias, peerAlias, peerNetns, noLinkLocal, upAfterAlias](RunContext& ctx, const LinkInfo& made, OpError* err) {
      if (alias) {
        int rc = SetAlias(*ctx.socket, made.index, *alias, err, noLinkLocal);
        if (rc == 0 && upAfterAlias) {
          rc = SetLinkUp(*ctx.socket, made.index, true, &err->extack);
          if (rc < 0) err->context = "set new link " + std::to_string(made.index) + " up";
        }
        if (rc < 0) return rc;
      }
      if (!peerAlias) return 0;
      if (!made.parentIndex) {
        err->context = "set alias on veth peer: the kernel did not report the peer's ifindex";
        return -ENODEV;
      }
      if (peerNetns) return SetAliasIn(*peerNetns, *made.parentIndex, *peerAlias, err);
      return SetAlias(*ctx.socket, *made.parentIndex, *peerAlias, err);
    };
  }
  return op;
}

PreparedOp PrepareLinkSet(const Fields& f) {
  LinkRef link = f.Link("link");
  PreparedOp op;
  op.name = "link.set";
  const bool rename = f.Has("name");
  bool any = false;

  RequestBuilder r(RTM_NEWLINK, kAck);
  ifinfomsg ifi{};
  if (auto up = f.OptBool("up")) {
    ifi.ifi_change = IFF_UP;
    ifi.ifi_flags = *up ? IFF_UP : 0;
    any = true;
  }
  size_t hdr = r.b.Struct(&ifi, sizeof ifi);
  // By name, the kernel can find the link itself (IFLA_IFNAME) unless IFLA_IFNAME is the new
  // name; then we look the index up first.
  if (link.byName && !rename) {
    r.b.Str(IFLA_IFNAME, link.name);
  } else {
    r.LinkAt(hdr + offsetof(ifinfomsg, ifi_index), link, f.PathOf("link"), true);
  }
  if (rename) {
    r.b.Str(IFLA_IFNAME, f.IfName("name"));
    any = true;
  }
  if (auto mtu = f.OptU32("mtu", 68, 65535)) { r.b.U32(IFLA_MTU, *mtu); any = true; }
  if (f.Has("mac")) {
    auto mac = Mac(f, "mac");
    r.b.Attr(IFLA_ADDRESS, mac.data(), mac.size());
    any = true;
  }
  if (f.IsNull("master")) { r.b.U32(IFLA_MASTER, 0); any = true; }
  else if (f.Has("master")) { r.LinkAttr(IFLA_MASTER, f.Link("master"), f.PathOf("master")); any = true; }
  if (f.Has("alias")) { PutAlias(r.b, f, "alias"); any = true; }
  if (auto g = f.OptU32("group")) { r.b.U32(IFLA_GROUP, *g); any = true; }
  if (auto q = f.OptU32("txqlen")) { r.b.U32(IFLA_TXQLEN, *q); any = true; }
  if (f.Has("netns")) { r.NetnsFdAttr(IFLA_NET_NS_FD, NetnsPath(f, "netns"), f.PathOf("netns")); any = true; }
  if (auto netfilter = f.OptBool("bridgeNetfilter")) {
    // A bridge's own settings ride in its kind's data; the kernel refuses them (EOPNOTSUPP)
    // on a link of another kind.
    size_t info = r.b.Begin(IFLA_LINKINFO);
    r.b.Str(IFLA_INFO_KIND, "bridge");
    size_t data = r.b.Begin(IFLA_INFO_DATA);
    PutBridgeNetfilter(r.b, *netfilter);
    r.b.End(data);
    r.b.End(info);
    any = true;
  }

  auto hairpin = f.OptBool("hairpin");
  auto learning = f.OptBool("learning");
  const bool portFlags = hairpin || learning;
  if (any || !portFlags) op.requests.push_back(r.Done());
  if (portFlags) {
    // Bridge port flags go to the bridge's own handler (AF_BRIDGE), as `bridge link set` does;
    // after the request above, which may have just made the link a port.
    RequestBuilder h(RTM_SETLINK, kAck);
    ifinfomsg bi{};
    bi.ifi_family = AF_BRIDGE;
    size_t bh = h.b.Struct(&bi, sizeof bi);
    LinkRef target = link;
    if (rename) target = LinkRef{true, f.Str("name"), 0};
    h.LinkAt(bh + offsetof(ifinfomsg, ifi_index), target, f.PathOf("link"), true);
    size_t prot = h.b.Begin(IFLA_PROTINFO | NLA_F_NESTED);
    if (hairpin) h.b.U8(IFLA_BRPORT_MODE, *hairpin ? 1 : 0);
    if (learning) h.b.U8(IFLA_BRPORT_LEARNING, *learning ? 1 : 0);
    h.b.End(prot);
    op.requests.push_back(h.Done());
  }
  // Retiring a device that went with its netns finds nothing to change: fine on undo paths.
  op.ignoreMissing = f.Bool("ignoreMissing", false);
  op.missingErrnos = {ENODEV};
  return op;
}

PreparedOp PrepareLinkDel(const Fields& f) {
  LinkRef link = f.Link("link");
  RequestBuilder r(RTM_DELLINK, kAck);
  ifinfomsg ifi{};
  size_t hdr = r.b.Struct(&ifi, sizeof ifi);
  if (link.byName) r.b.Str(IFLA_IFNAME, link.name);
  else r.LinkAt(hdr + offsetof(ifinfomsg, ifi_index), link, f.PathOf("link"), true);
  PreparedOp op = Single("link.del", r.Done());
  op.ignoreMissing = f.Bool("ignoreMissing", false);
  op.missingErrnos = {ENODEV};
  return op;
}

PreparedOp PrepareLinkDelGroup(const Fields& f) {
  // Group 0 is the default group: every link, eth0 included. Never a thing to delete.
  uint32_t group = f.U32("group", 1, UINT32_MAX);
  RequestBuilder r(RTM_DELLINK, kAck);
  ifinfomsg ifi{};
  r.b.Struct(&ifi, sizeof ifi);
  r.b.U32(IFLA_GROUP, group);
  PreparedOp op = Single("link.delGroup", r.Done());
  op.ignoreMissing = f.Bool("ignoreMissing", false);
  op.missingErrnos = {ENODEV};
  return op;
}

PreparedOp PrepareLinkGet(const Fields& f) {
  LinkRef link = f.Link("link");
  RequestBuilder r(RTM_GETLINK, kAck, ReplyKind::Link);
  ifinfomsg ifi{};
  size_t hdr = r.b.Struct(&ifi, sizeof ifi);
  if (link.byName) r.b.Str(IFLA_IFNAME, link.name);
  else r.LinkAt(hdr + offsetof(ifinfomsg, ifi_index), link, f.PathOf("link"), true);
  uint32_t mask = RTEXT_FILTER_SKIP_STATS;
  const bool vfs = f.Bool("vfs", false);
  if (vfs) mask |= RTEXT_FILTER_VF;
  r.b.U32(IFLA_EXT_MASK, mask);
  PreparedOp op = Single("link.get", r.Done());
  if (vfs) {
    // A link without SR-IOV sends no IFLA_VFINFO_LIST: that is "no VFs", not "unknown".
    op.filter = [](OpResult* res) {
      if (res->link && !res->link->vfs) res->link->vfs.emplace();
    };
  }
  return op;
}

PreparedOp PrepareLinkList(const Fields& f) {
  RequestBuilder r(RTM_GETLINK, NLM_F_REQUEST | NLM_F_DUMP, ReplyKind::Links);
  ifinfomsg ifi{};
  r.b.Struct(&ifi, sizeof ifi);
  r.b.U32(IFLA_EXT_MASK, RTEXT_FILTER_SKIP_STATS);
  auto kind = f.OptStr("kind");
  if (kind) {
    size_t info = r.b.Begin(IFLA_LINKINFO);
    r.b.Str(IFLA_INFO_KIND, *kind);
    r.b.End(info);
  }
  PreparedOp op = Single("link.list", r.Done());
  if (kind) {
    std::string want = *kind;
    op.filter = [want](OpResult* res) {
      auto& v = *res->links;
      v.erase(std::remove_if(v.begin(), v.end(), [&](const LinkInfo& l) { return l.kind != want; }), v.end());
    };
  }
  return op;
}

namespace {

const char* OperState(uint8_t s) {
  static const char* names[] = {"unknown", "notpresent", "down", "lowerlayerdown", "testing", "dormant", "up"};
  return s < 7 ? names[s] : "unknown";
}

VxlanInfo ParseVxlan(const Attr& data) {
  VxlanInfo v;
  AttrIter it(data);
  Attr a;
  while (it.Next(&a)) {
    switch (a.type) {
      case IFLA_VXLAN_ID: v.vni = a.U32(); break;
      case IFLA_VXLAN_PORT: v.port = ntohs(a.U16()); break;
      case IFLA_VXLAN_LOCAL: if (a.len >= 4) v.local = FormatIp(AF_INET, a.data); break;
      case IFLA_VXLAN_LOCAL6: if (a.len >= 16) v.local = FormatIp(AF_INET6, a.data); break;
      case IFLA_VXLAN_LINK: v.dev = a.U32(); break;
      default: break;
    }
  }
  return v;
}

BridgeInfo ParseBridge(const Attr& data) {
  BridgeInfo b;
  AttrIter it(data);
  Attr a;
  while (it.Next(&a)) {
    switch (a.type) {
      case IFLA_BR_NF_CALL_IPTABLES: b.nfCallIptables = a.U8() != 0; break;
      case IFLA_BR_NF_CALL_IP6TABLES: b.nfCallIp6tables = a.U8() != 0; break;
      default: break;
    }
  }
  return b;
}

}  // namespace

bool ParseLink(const Message& m, LinkInfo* out) {
  const auto* h = reinterpret_cast<const nlmsghdr*>(m.data());
  if (h->nlmsg_type != RTM_NEWLINK || h->nlmsg_len < NLMSG_LENGTH(sizeof(ifinfomsg))) return false;
  const auto* ifi = static_cast<const ifinfomsg*>(NLMSG_DATA(h));
  out->index = static_cast<uint32_t>(ifi->ifi_index);
  out->up = ifi->ifi_flags & IFF_UP;
  out->lowerUp = ifi->ifi_flags & IFF_LOWER_UP;
  out->operstate = "unknown";
  AttrIter it = MessageAttrs(h, sizeof(ifinfomsg));
  Attr a;
  while (it.Next(&a)) {
    switch (a.type) {
      case IFLA_IFNAME: out->name = a.Str(); break;
      case IFLA_MTU: out->mtu = a.U32(); break;
      case IFLA_ADDRESS: out->mac = FormatMac(a.data, a.len); break;
      case IFLA_OPERSTATE: out->operstate = OperState(a.U8()); break;
      case IFLA_MASTER: out->master = a.U32(); break;
      case IFLA_IFALIAS: out->alias = a.Str(); break;
      case IFLA_GROUP: out->group = a.U32(); break;
      case IFLA_TXQLEN: out->txqlen = a.U32(); break;
      case IFLA_LINK: out->parentIndex = a.U32(); break;
      case IFLA_LINK_NETNSID: out->linkNetnsId = a.S32(); break;
      case IFLA_NUM_TX_QUEUES: out->numTxQueues = a.U32(); break;
      case IFLA_LINKINFO: {
        Attr kind, data;
        if (FindAttr(a, IFLA_INFO_KIND, &kind)) out->kind = kind.Str();
        if (out->kind == "vxlan" && FindAttr(a, IFLA_INFO_DATA, &data)) out->vxlan = ParseVxlan(data);
        if (out->kind == "bridge" && FindAttr(a, IFLA_INFO_DATA, &data)) out->bridge = ParseBridge(data);
        break;
      }
      case IFLA_VFINFO_LIST: {
        std::vector<VfInfo> vfs;
        ParseVfList(a, &vfs);
        out->vfs = std::move(vfs);
        break;
      }
      default: break;
    }
  }
  return true;
}

}  // namespace knit::nl
