// Routes: RTM_NEWROUTE / RTM_DELROUTE / RTM_GETROUTE.
#include <errno.h>
#include <linux/rtnetlink.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <optional>

#include "nl/families.h"
#include "nl/inet.h"

namespace knit::nl {

namespace {

uint32_t FamilyField(const Fields& f) {
  auto family = f.OptU32("family", 4, 6);
  if (family && *family != 4 && *family != 6) f.RangeFail("family", "must be 4 or 6");
  return family.value_or(0);
}

std::string ScopeName(uint8_t s) {
  switch (s) {
    case RT_SCOPE_UNIVERSE: return "universe";
    case RT_SCOPE_SITE: return "site";
    case RT_SCOPE_LINK: return "link";
    case RT_SCOPE_HOST: return "host";
    case RT_SCOPE_NOWHERE: return "nowhere";
    default: return std::to_string(s);
  }
}

std::string ProtocolName(uint8_t p) {
  switch (p) {
    case RTPROT_UNSPEC: return "unspec";
    case RTPROT_REDIRECT: return "redirect";
    case RTPROT_KERNEL: return "kernel";
    case RTPROT_BOOT: return "boot";
    case RTPROT_STATIC: return "static";
    case RTPROT_RA: return "ra";
    case RTPROT_DHCP: return "dhcp";
    default: return std::to_string(p);
  }
}

std::string TypeName(uint8_t t) {
  switch (t) {
    case RTN_UNICAST: return "unicast";
    case RTN_LOCAL: return "local";
    case RTN_BROADCAST: return "broadcast";
    case RTN_BLACKHOLE: return "blackhole";
    case RTN_UNREACHABLE: return "unreachable";
    case RTN_PROHIBIT: return "prohibit";
    default: return std::to_string(t);
  }
}

}  // namespace

PreparedOp PrepareRoute(const Fields& f, const std::string& verb) {
  const bool del = verb == "del";
  uint16_t flags = NLM_F_REQUEST | NLM_F_ACK;
  if (verb == "add") flags |= NLM_F_CREATE | NLM_F_EXCL;
  if (verb == "replace") flags |= NLM_F_CREATE | NLM_F_REPLACE;
  RequestBuilder r(del ? RTM_DELROUTE : RTM_NEWROUTE, flags);

  std::string dstText = f.Str("dst");
  uint32_t family = FamilyField(f);
  Cidr dst;
  if (dstText == "default") {
    dst.addr.family = family == 6 ? AF_INET6 : AF_INET;
    dst.prefix = 0;
  } else {
    if (!ParseCidr(dstText, &dst)) f.RangeFail("dst", "'" + dstText + "' is not a CIDR (10.0.0.0/24, fd00::/64) or 'default'");
    if (family && (family == 4) != (dst.addr.family == AF_INET)) f.RangeFail("family", "does not match dst '" + dstText + "'");
  }
  std::optional<IpAddr> gateway;
  if (f.Has("gateway")) {
    IpAddr gw;
    if (!ParseIp(f.Str("gateway"), &gw)) f.RangeFail("gateway", "'" + f.Str("gateway") + "' is not an IP address");
    if (gw.family != dst.addr.family) f.RangeFail("gateway", "address family differs from dst '" + dstText + "'");
    gateway = gw;
  }
  uint32_t table = f.OptU32("table", 1).value_or(static_cast<uint32_t>(RT_TABLE_MAIN));
  // A blackhole or unreachable route has no next hop: the kernel drops (or answers ICMP
  // unreachable for) what matches it.
  const auto type = f.OptEnum("type", {"unicast", "blackhole", "unreachable"});
  const bool nowhere = type && *type != "unicast";
  if (nowhere && (gateway || f.Has("link"))) f.RangeFail("type", "a " + *type + " route takes no gateway or link");
  // The route's owner (rtm_protocol). Deletion matches it when given, so an owner removes only
  // its own routes; knit's cluster routes carry its number (src/base/names.ts ROUTE_PROTOCOL).
  const auto protocol = f.OptU32("protocol", 1, 255);

  rtmsg rtm{};
  rtm.rtm_family = static_cast<uint8_t>(dst.addr.family);
  rtm.rtm_dst_len = static_cast<uint8_t>(dst.prefix);
  rtm.rtm_table = table < 256 ? static_cast<uint8_t>(table) : static_cast<uint8_t>(RT_TABLE_UNSPEC);
  if (del) {
    // Deletion matches on what is given; scope NOWHERE and type/protocol 0 are wildcards.
    rtm.rtm_scope = RT_SCOPE_NOWHERE;
    if (protocol) rtm.rtm_protocol = static_cast<uint8_t>(*protocol);
    if (type) rtm.rtm_type = *type == "blackhole" ? RTN_BLACKHOLE : *type == "unreachable" ? RTN_UNREACHABLE : RTN_UNICAST;
  } else {
    rtm.rtm_protocol = static_cast<uint8_t>(protocol.value_or(RTPROT_BOOT));
    rtm.rtm_type = !nowhere ? RTN_UNICAST : *type == "blackhole" ? RTN_BLACKHOLE : RTN_UNREACHABLE;
    // As iproute2: a unicast route without a gateway is on-link (scope link), else universe.
    rtm.rtm_scope = gateway || nowhere ? RT_SCOPE_UNIVERSE : RT_SCOPE_LINK;
  }
  if (auto scope = f.OptEnum("scope", {"universe", "link", "host"}))
    rtm.rtm_scope = *scope == "link" ? RT_SCOPE_LINK : *scope == "host" ? RT_SCOPE_HOST : RT_SCOPE_UNIVERSE;
  if (f.Bool("onlink", false)) rtm.rtm_flags |= RTNH_F_ONLINK;
  r.b.Struct(&rtm, sizeof rtm);

  r.b.U32(RTA_TABLE, table);
  if (dst.prefix > 0 || dstText != "default") r.b.Attr(RTA_DST, dst.addr.bytes, dst.addr.Len());
  if (gateway) r.b.Attr(RTA_GATEWAY, gateway->bytes, gateway->Len());
  if (f.Has("link")) r.LinkAttr(RTA_OIF, f.Link("link"), f.PathOf("link"), true);
  if (auto metric = f.OptU32("metric")) r.b.U32(RTA_PRIORITY, *metric);
  if (f.Has("src")) {
    IpAddr src;
    if (!ParseIp(f.Str("src"), &src)) f.RangeFail("src", "'" + f.Str("src") + "' is not an IP address");
    if (src.family != dst.addr.family) f.RangeFail("src", "address family differs from dst '" + dstText + "'");
    r.b.Attr(RTA_PREFSRC, src.bytes, src.Len());
  }
  if (auto mtu = f.OptU32("mtu", 68, 65535)) {
    size_t metrics = r.b.Begin(RTA_METRICS);
    r.b.U32(RTAX_MTU, *mtu);
    r.b.End(metrics);
  }
  PreparedOp op;
  op.name = "route." + verb;
  op.requests.push_back(r.Done());
  op.ignoreMissing = f.Bool("ignoreMissing", false);
  op.missingErrnos = {ESRCH, ENODEV, ENOENT};
  return op;
}

PreparedOp PrepareRouteList(const Fields& f) {
  RequestBuilder r(RTM_GETROUTE, NLM_F_REQUEST | NLM_F_DUMP, ReplyKind::Routes);
  uint32_t family = FamilyField(f);
  uint32_t table = f.OptU32("table", 1).value_or(static_cast<uint32_t>(RT_TABLE_MAIN));
  rtmsg rtm{};
  rtm.rtm_family = family == 4 ? AF_INET : family == 6 ? AF_INET6 : AF_UNSPEC;
  rtm.rtm_table = table < 256 ? static_cast<uint8_t>(table) : static_cast<uint8_t>(RT_TABLE_UNSPEC);
  r.b.Struct(&rtm, sizeof rtm);
  r.b.U32(RTA_TABLE, table);  // with strict checking the kernel dumps only this table
  PreparedOp op;
  op.name = "route.list";
  op.requests.push_back(r.Done());
  op.filter = [table](OpResult* res) {
    auto& v = *res->routes;
    v.erase(std::remove_if(v.begin(), v.end(), [&](const RouteInfo& x) { return x.table != table; }), v.end());
  };
  return op;
}

bool ParseRoute(const Message& m, RouteInfo* out) {
  const auto* h = reinterpret_cast<const nlmsghdr*>(m.data());
  if (h->nlmsg_type != RTM_NEWROUTE || h->nlmsg_len < NLMSG_LENGTH(sizeof(rtmsg))) return false;
  const auto* rtm = static_cast<const rtmsg*>(NLMSG_DATA(h));
  if (rtm->rtm_family != AF_INET && rtm->rtm_family != AF_INET6) return false;
  if (rtm->rtm_flags & RTM_F_CLONED) return false;
  const int af = rtm->rtm_family;
  const size_t alen = af == AF_INET ? 4 : 16;
  out->family = af == AF_INET ? 4 : 6;
  out->table = rtm->rtm_table;
  out->scope = ScopeName(rtm->rtm_scope);
  out->protocol = ProtocolName(rtm->rtm_protocol);
  out->type = TypeName(rtm->rtm_type);
  out->onlink = rtm->rtm_flags & RTNH_F_ONLINK;
  out->dst = "default";
  AttrIter it = MessageAttrs(h, sizeof(rtmsg));
  Attr a;
  while (it.Next(&a)) {
    switch (a.type) {
      case RTA_DST:
        if (a.len >= alen) out->dst = FormatIp(af, a.data) + "/" + std::to_string(rtm->rtm_dst_len);
        break;
      case RTA_GATEWAY:
        if (a.len >= alen) out->gateway = FormatIp(af, a.data);
        break;
      case RTA_PREFSRC:
        if (a.len >= alen) out->src = FormatIp(af, a.data);
        break;
      case RTA_OIF: out->index = a.U32(); break;
      case RTA_TABLE: out->table = a.U32(); break;
      case RTA_PRIORITY: out->metric = a.U32(); break;
      case RTA_METRICS: {
        Attr mtu;
        if (FindAttr(a, RTAX_MTU, &mtu)) out->mtu = mtu.U32();
        break;
      }
      default: break;
    }
  }
  return true;
}

}  // namespace knit::nl
