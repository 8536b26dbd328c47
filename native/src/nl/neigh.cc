// Neighbours (ARP/NDP entries, and proxy entries): RTM_NEWNEIGH / RTM_DELNEIGH / RTM_GETNEIGH.
#include <errno.h>
#include <linux/neighbour.h>
#include <linux/rtnetlink.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>

#include "nl/families.h"
#include "nl/inet.h"

namespace knit::nl {

PreparedOp PrepareNeigh(const Fields& f, const std::string& verb) {
  const bool add = verb != "del";
  LinkRef link = f.Link("link");
  IpAddr dst;
  if (!ParseIp(f.Str("address"), &dst)) f.RangeFail("address", "'" + f.Str("address") + "' is not an IP address");
  const bool proxy = f.Bool("proxy", false);
  RequestBuilder r(add ? RTM_NEWNEIGH : RTM_DELNEIGH, NLM_F_REQUEST | NLM_F_ACK | (add ? NLM_F_CREATE | (verb == "replace" ? NLM_F_REPLACE : NLM_F_EXCL) : 0));
  ndmsg nd{};
  nd.ndm_family = static_cast<uint8_t>(dst.family);
  nd.ndm_state = add ? NUD_PERMANENT : 0;
  nd.ndm_flags = proxy ? NTF_PROXY : 0;
  size_t hdr = r.b.Struct(&nd, sizeof nd);
  r.LinkAt(hdr + offsetof(ndmsg, ndm_ifindex), link, f.PathOf("link"), true);
  r.b.Attr(NDA_DST, dst.bytes, dst.Len());
  if (add && !proxy) {
    std::vector<uint8_t> mac;
    if (!f.Has("lladdr")) f.TypeFail("lladdr", "expected string (required for a non-proxy neigh.add or neigh.replace), got undefined");
    if (!ParseMac(f.Str("lladdr"), &mac)) f.RangeFail("lladdr", "'" + f.Str("lladdr") + "' is not a MAC address");
    r.b.Attr(NDA_LLADDR, mac.data(), mac.size());
  }
  PreparedOp op;
  op.name = "neigh." + verb;
  op.requests.push_back(r.Done());
  op.ignoreMissing = f.Bool("ignoreMissing", false);
  op.missingErrnos = {ENOENT, ENODEV};
  return op;
}

PreparedOp PrepareNeighList(const Fields& f) {
  auto family = f.OptU32("family", 4, 6);
  if (family && *family != 4 && *family != 6) f.RangeFail("family", "must be 4 or 6");
  auto link = f.OptLink("link");
  PreparedOp op;
  op.name = "neigh.list";
  // One dump per family (AF_UNSPEC would also reach the bridge FDB) and per table: proxy
  // entries live apart from the neighbour cache and are dumped only on request.
  for (int af : {AF_INET, AF_INET6}) {
    if (family && (*family == 4) != (af == AF_INET)) continue;
    for (bool proxy : {false, true}) {
      RequestBuilder r(RTM_GETNEIGH, NLM_F_REQUEST | NLM_F_DUMP, ReplyKind::Neighs);
      ndmsg nd{};
      nd.ndm_family = static_cast<uint8_t>(af);
      nd.ndm_flags = proxy ? NTF_PROXY : 0;
      r.b.Struct(&nd, sizeof nd);
      if (link) r.LinkAttr(NDA_IFINDEX, *link, f.PathOf("link"), true);
      op.requests.push_back(r.Done());
    }
  }
  if (link) {
    op.filter = [](OpResult* res) {
      auto& v = *res->neighs;
      uint32_t want = res->index;
      v.erase(std::remove_if(v.begin(), v.end(), [&](const NeighInfo& n) { return n.index != want; }), v.end());
    };
  }
  return op;
}

bool ParseNeigh(const Message& m, NeighInfo* out) {
  const auto* h = reinterpret_cast<const nlmsghdr*>(m.data());
  if (h->nlmsg_type != RTM_NEWNEIGH || h->nlmsg_len < NLMSG_LENGTH(sizeof(ndmsg))) return false;
  const auto* nd = static_cast<const ndmsg*>(NLMSG_DATA(h));
  if (nd->ndm_family != AF_INET && nd->ndm_family != AF_INET6) return false;
  const size_t alen = nd->ndm_family == AF_INET ? 4 : 16;
  out->index = static_cast<uint32_t>(nd->ndm_ifindex);
  out->family = nd->ndm_family == AF_INET ? 4 : 6;
  out->proxy = nd->ndm_flags & NTF_PROXY;
  AttrIter it = MessageAttrs(h, sizeof(ndmsg));
  Attr a;
  while (it.Next(&a)) {
    if (a.type == NDA_DST && a.len >= alen) out->address = FormatIp(nd->ndm_family, a.data);
    else if (a.type == NDA_LLADDR) out->lladdr = FormatMac(a.data, a.len);
  }
  static const std::pair<uint16_t, const char*> names[] = {
      {NUD_INCOMPLETE, "incomplete"}, {NUD_REACHABLE, "reachable"}, {NUD_STALE, "stale"}, {NUD_DELAY, "delay"},
      {NUD_PROBE, "probe"}, {NUD_FAILED, "failed"}, {NUD_NOARP, "noarp"}, {NUD_PERMANENT, "permanent"},
  };
  for (const auto& [bit, name] : names)
    if (nd->ndm_state & bit) out->state.push_back(name);
  if (out->state.empty() && !out->proxy) out->state.push_back("none");
  return true;
}

}  // namespace knit::nl
