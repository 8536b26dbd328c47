// Addresses: RTM_NEWADDR / RTM_DELADDR / RTM_GETADDR.
#include <errno.h>
#include <linux/if_addr.h>
#include <linux/rtnetlink.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>

#include "nl/families.h"
#include "nl/inet.h"

namespace knit::nl {

namespace {

uint8_t ScopeValue(const std::string& s) {
  if (s == "link") return RT_SCOPE_LINK;
  if (s == "host") return RT_SCOPE_HOST;
  return RT_SCOPE_UNIVERSE;
}

std::string ScopeName(uint8_t s) {
  switch (s) {
    case RT_SCOPE_UNIVERSE: return "global";
    case RT_SCOPE_SITE: return "site";
    case RT_SCOPE_LINK: return "link";
    case RT_SCOPE_HOST: return "host";
    case RT_SCOPE_NOWHERE: return "nowhere";
    default: return std::to_string(s);
  }
}

Cidr ParseCidrField(const Fields& f, const char* key) {
  Cidr c;
  if (!ParseCidr(f.Str(key), &c)) f.RangeFail(key, "'" + f.Str(key) + "' is not an address with prefix (10.0.0.2/24, fd00::2/64)");
  return c;
}

}  // namespace

PreparedOp PrepareAddr(const Fields& f, bool add) {
  LinkRef link = f.Link("link");
  Cidr local = ParseCidrField(f, "address");
  RequestBuilder r(add ? RTM_NEWADDR : RTM_DELADDR, NLM_F_REQUEST | NLM_F_ACK | (add ? NLM_F_CREATE | NLM_F_EXCL : 0));
  ifaddrmsg ifa{};
  ifa.ifa_family = static_cast<uint8_t>(local.addr.family);
  ifa.ifa_prefixlen = static_cast<uint8_t>(local.prefix);
  ifa.ifa_scope = ScopeValue(f.OptEnum("scope", {"global", "link", "host"}).value_or("global"));
  size_t hdr = r.b.Struct(&ifa, sizeof ifa);
  r.LinkAt(hdr + offsetof(ifaddrmsg, ifa_index), link, f.PathOf("link"), true);

  r.b.Attr(IFA_LOCAL, local.addr.bytes, local.addr.Len());
  if (f.Has("peer")) {
    IpAddr peer;
    if (!ParseIp(f.Str("peer"), &peer)) f.RangeFail("peer", "'" + f.Str("peer") + "' is not an IP address");
    if (peer.family != local.addr.family) f.RangeFail("peer", "address family differs from address '" + f.Str("address") + "'");
    r.b.Attr(IFA_ADDRESS, peer.bytes, peer.Len());
  } else {
    r.b.Attr(IFA_ADDRESS, local.addr.bytes, local.addr.Len());
    // IPv4 subnets get the usual all-ones broadcast (what `ip addr add ... brd +` sets).
    if (add && local.addr.family == AF_INET && local.prefix <= 30) {
      uint32_t a;
      std::memcpy(&a, local.addr.bytes, 4);
      uint32_t host = local.prefix == 0 ? 0xffffffffu : (0xffffffffu >> local.prefix);
      uint32_t brd = a | htonl(host);
      r.b.Attr(IFA_BROADCAST, &brd, 4);
    }
  }
  uint32_t flags = 0;
  if (f.Bool("noDad", false)) flags |= IFA_F_NODAD;
  if (f.Bool("noPrefixRoute", false)) flags |= IFA_F_NOPREFIXROUTE;
  if (add && flags) r.b.U32(IFA_FLAGS, flags);

  PreparedOp op;
  op.name = add ? "addr.add" : "addr.del";
  op.requests.push_back(r.Done());
  op.ignoreMissing = f.Bool("ignoreMissing", false);
  op.missingErrnos = {EADDRNOTAVAIL, ENODEV, ENOENT};
  return op;
}

PreparedOp PrepareAddrList(const Fields& f) {
  RequestBuilder r(RTM_GETADDR, NLM_F_REQUEST | NLM_F_DUMP, ReplyKind::Addrs);
  ifaddrmsg ifa{};
  auto family = f.OptU32("family", 4, 6);
  if (family && *family != 4 && *family != 6) f.RangeFail("family", "must be 4 or 6");
  ifa.ifa_family = family ? (*family == 4 ? AF_INET : AF_INET6) : AF_UNSPEC;
  size_t hdr = r.b.Struct(&ifa, sizeof ifa);
  const bool byLink = f.Has("link");
  if (byLink) r.LinkAt(hdr + offsetof(ifaddrmsg, ifa_index), f.Link("link"), f.PathOf("link"), true);
  PreparedOp op;
  op.name = "addr.list";
  op.requests.push_back(r.Done());
  if (byLink) {
    op.filter = [](OpResult* res) {
      auto& v = *res->addrs;
      uint32_t want = res->index;
      v.erase(std::remove_if(v.begin(), v.end(), [&](const AddrInfo& a) { return a.index != want; }), v.end());
    };
  }
  return op;
}

bool ParseAddr(const Message& m, AddrInfo* out) {
  const auto* h = reinterpret_cast<const nlmsghdr*>(m.data());
  if (h->nlmsg_type != RTM_NEWADDR || h->nlmsg_len < NLMSG_LENGTH(sizeof(ifaddrmsg))) return false;
  const auto* ifa = static_cast<const ifaddrmsg*>(NLMSG_DATA(h));
  if (ifa->ifa_family != AF_INET && ifa->ifa_family != AF_INET6) return false;
  out->index = ifa->ifa_index;
  out->family = ifa->ifa_family == AF_INET ? 4 : 6;
  out->prefixLen = ifa->ifa_prefixlen;
  out->scope = ScopeName(ifa->ifa_scope);
  uint32_t flags = ifa->ifa_flags;
  std::string local, address;
  AttrIter it = MessageAttrs(h, sizeof(ifaddrmsg));
  Attr a;
  const size_t alen = ifa->ifa_family == AF_INET ? 4 : 16;
  while (it.Next(&a)) {
    if (a.type == IFA_LOCAL && a.len >= alen) local = FormatIp(ifa->ifa_family, a.data);
    else if (a.type == IFA_ADDRESS && a.len >= alen) address = FormatIp(ifa->ifa_family, a.data);
    else if (a.type == IFA_FLAGS) flags = a.U32();
  }
  // IFA_LOCAL is our address when present; IFA_ADDRESS is then the peer (if it differs).
  if (!local.empty()) {
    out->address = local;
    if (!address.empty() && address != local) out->peer = address;
  } else {
    out->address = address;
  }
  static const std::pair<uint32_t, const char*> names[] = {
      {IFA_F_SECONDARY, "secondary"},   {IFA_F_NODAD, "nodad"},           {IFA_F_OPTIMISTIC, "optimistic"},
      {IFA_F_DADFAILED, "dadfailed"},   {IFA_F_HOMEADDRESS, "homeaddress"}, {IFA_F_DEPRECATED, "deprecated"},
      {IFA_F_TENTATIVE, "tentative"},   {IFA_F_PERMANENT, "permanent"},   {IFA_F_MANAGETEMPADDR, "mngtmpaddr"},
      {IFA_F_NOPREFIXROUTE, "noprefixroute"}, {IFA_F_MCAUTOJOIN, "autojoin"}, {IFA_F_STABLE_PRIVACY, "stable-privacy"},
  };
  for (const auto& [bit, name] : names)
    if (flags & bit) out->flags.push_back(name);
  return true;
}

}  // namespace knit::nl
