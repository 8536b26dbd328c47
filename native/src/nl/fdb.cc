// Forwarding database entries (AF_BRIDGE neighbours): RTM_NEWNEIGH / RTM_DELNEIGH / RTM_GETNEIGH.
// knit writes the static entries of a VXLAN device, `bridge fdb replace MAC dev VTEP dst IP self
// permanent`: frames for a remote node's VTEP MAC go in a UDP packet to that node's address.
#include <errno.h>
#include <linux/neighbour.h>
#include <linux/rtnetlink.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>

#include "nl/families.h"
#include "nl/inet.h"

namespace knit::nl {

PreparedOp PrepareFdb(const Fields& f, const std::string& verb) {
  const bool del = verb == "del";
  LinkRef link = f.Link("link");
  std::vector<uint8_t> mac;
  if (!ParseMac(f.Str("mac"), &mac)) f.RangeFail("mac", "'" + f.Str("mac") + "' is not a MAC address");
  RequestBuilder r(del ? RTM_DELNEIGH : RTM_NEWNEIGH, NLM_F_REQUEST | NLM_F_ACK | (del ? 0 : NLM_F_CREATE | NLM_F_REPLACE));
  ndmsg nd{};
  nd.ndm_family = AF_BRIDGE;
  nd.ndm_state = del ? 0 : NUD_PERMANENT;
  // NTF_SELF: the entry belongs to the device's own table (the VXLAN driver's), not to a bridge
  // it may be a port of.
  nd.ndm_flags = NTF_SELF;
  size_t hdr = r.b.Struct(&nd, sizeof nd);
  r.LinkAt(hdr + offsetof(ndmsg, ndm_ifindex), link, f.PathOf("link"), true);
  r.b.Attr(NDA_LLADDR, mac.data(), mac.size());
  if (f.Has("dst")) {
    IpAddr dst;
    if (!ParseIp(f.Str("dst"), &dst)) f.RangeFail("dst", "'" + f.Str("dst") + "' is not an IP address");
    r.b.Attr(NDA_DST, dst.bytes, dst.Len());
  } else if (!del) {
    f.TypeFail("dst", "expected string (the remote VTEP's address), got undefined");
  }
  PreparedOp op;
  op.name = "fdb." + verb;
  op.requests.push_back(r.Done());
  op.ignoreMissing = f.Bool("ignoreMissing", false);
  op.missingErrnos = {ENOENT, ENODEV};
  return op;
}

PreparedOp PrepareFdbList(const Fields& f) {
  auto link = f.OptLink("link");
  RequestBuilder r(RTM_GETNEIGH, NLM_F_REQUEST | NLM_F_DUMP, ReplyKind::Fdb);
  ndmsg nd{};
  nd.ndm_family = AF_BRIDGE;
  r.b.Struct(&nd, sizeof nd);
  if (link) r.LinkAttr(NDA_IFINDEX, *link, f.PathOf("link"), true);
  PreparedOp op;
  op.name = "fdb.list";
  op.requests.push_back(r.Done());
  if (link) {
    op.filter = [](OpResult* res) {
      auto& v = *res->fdb;
      uint32_t want = res->index;
      v.erase(std::remove_if(v.begin(), v.end(), [&](const FdbInfo& e) { return e.index != want; }), v.end());
    };
  }
  return op;
}

bool ParseFdb(const Message& m, FdbInfo* out) {
  const auto* h = reinterpret_cast<const nlmsghdr*>(m.data());
  if (h->nlmsg_type != RTM_NEWNEIGH || h->nlmsg_len < NLMSG_LENGTH(sizeof(ndmsg))) return false;
  const auto* nd = static_cast<const ndmsg*>(NLMSG_DATA(h));
  if (nd->ndm_family != AF_BRIDGE) return false;
  out->index = static_cast<uint32_t>(nd->ndm_ifindex);
  out->self = nd->ndm_flags & NTF_SELF;
  AttrIter it = MessageAttrs(h, sizeof(ndmsg));
  Attr a;
  while (it.Next(&a)) {
    if (a.type == NDA_LLADDR) out->mac = FormatMac(a.data, a.len);
    else if (a.type == NDA_DST && a.len == 4) out->dst = FormatIp(AF_INET, a.data);
    else if (a.type == NDA_DST && a.len == 16) out->dst = FormatIp(AF_INET6, a.data);
    else if (a.type == NDA_MASTER) out->master = a.U32();
  }
  if (nd->ndm_state & NUD_PERMANENT) out->state.push_back("permanent");
  if (nd->ndm_state & NUD_NOARP) out->state.push_back("static");
  if (nd->ndm_state & NUD_REACHABLE) out->state.push_back("reachable");
  if (nd->ndm_state & NUD_STALE) out->state.push_back("stale");
  return true;
}

}  // namespace knit::nl
