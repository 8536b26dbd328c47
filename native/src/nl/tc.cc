// Traffic control: ingress/clsact qdiscs (tbf in tbf.cc) and the u32 match-all + mirred redirect filter that
// Kata uses to splice a veth and a tap (RTM_*QDISC, RTM_*TFILTER).
#include <errno.h>
#include <linux/if_ether.h>
#include <linux/pkt_cls.h>
#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>
#include <linux/tc_act/tc_mirred.h>
#include <netinet/in.h>

#include <algorithm>
#include <cstdio>

#include "nl/families.h"

namespace knit::nl {

namespace {

constexpr uint32_t kQdiscHandle = 0xFFFF0000;  // "ffff:", the handle ingress and clsact own
// clsact's hooks. An ingress qdisc accepts the ingress one too, so 'ingress' works on both.
constexpr uint32_t kIngressHook = 0xFFFFFFF2;  // TC_H_MAKE(TC_H_CLSACT, TC_H_MIN_INGRESS)
constexpr uint32_t kEgressHook = 0xFFFFFFF3;   // TC_H_MAKE(TC_H_CLSACT, TC_H_MIN_EGRESS)

uint32_t Hook(const Fields& f) { return f.Enum("parent", {"ingress", "egress"}) == "ingress" ? kIngressHook : kEgressHook; }

std::string FormatHandle(uint32_t h) {
  if (h == TC_H_ROOT) return "root";
  if (h == 0) return "none";
  char buf[24];
  if (TC_H_MIN(h)) std::snprintf(buf, sizeof buf, "%x:%x", TC_H_MAJ(h) >> 16, TC_H_MIN(h));
  else std::snprintf(buf, sizeof buf, "%x:", TC_H_MAJ(h) >> 16);
  return buf;
}

size_t TcHeader(RequestBuilder& r, const LinkRef& link, const std::string& field, uint32_t handle, uint32_t parent, uint32_t info) {
  tcmsg t{};
  t.tcm_family = AF_UNSPEC;
  t.tcm_handle = handle;
  t.tcm_parent = parent;
  t.tcm_info = info;
  size_t hdr = r.b.Struct(&t, sizeof t);
  r.LinkAt(hdr + offsetof(tcmsg, tcm_ifindex), link, field, true);
  return hdr;
}

}  // namespace

PreparedOp PrepareQdisc(const Fields& f, bool add) {
  std::string kind = f.Enum("kind", {"ingress", "clsact", "tbf"});
  if (kind == "tbf") return PrepareTbf(f, add);
  LinkRef link = f.Link("link");
  RequestBuilder r(add ? RTM_NEWQDISC : RTM_DELQDISC, NLM_F_REQUEST | NLM_F_ACK | (add ? NLM_F_CREATE | NLM_F_EXCL : 0));
  TcHeader(r, link, f.PathOf("link"), kQdiscHandle, TC_H_INGRESS, 0);  // TC_H_CLSACT == TC_H_INGRESS
  r.b.Str(TCA_KIND, kind);
  PreparedOp op;
  op.name = add ? "qdisc.add" : "qdisc.del";
  op.requests.push_back(r.Done());
  op.ignoreMissing = f.Bool("ignoreMissing", false);
  // A device without that qdisc answers EINVAL ("Cannot find specified qdisc") or ENOENT.
  op.missingErrnos = {ENOENT, EINVAL, ENODEV};
  return op;
}

PreparedOp PrepareQdiscList(const Fields& f) {
  RequestBuilder r(RTM_GETQDISC, NLM_F_REQUEST | NLM_F_DUMP, ReplyKind::Qdiscs);
  auto link = f.OptLink("link");
  tcmsg t{};
  size_t hdr = r.b.Struct(&t, sizeof t);
  if (link) r.LinkAt(hdr + offsetof(tcmsg, tcm_ifindex), *link, f.PathOf("link"), true);
  PreparedOp op;
  op.name = "qdisc.list";
  op.requests.push_back(r.Done());
  if (link) {
    op.filter = [](OpResult* res) {
      auto& v = *res->qdiscs;
      uint32_t want = res->index;
      v.erase(std::remove_if(v.begin(), v.end(), [&](const QdiscInfo& q) { return q.index != want; }), v.end());
    };
  }
  return op;
}

PreparedOp PrepareFilterAdd(const Fields& f) {
  LinkRef link = f.Link("link");
  uint32_t prio = f.OptU32("prio", 1, 0xFFFF).value_or(0);  // 0: the kernel picks (49152)
  RequestBuilder r(RTM_NEWTFILTER, NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL);
  TcHeader(r, link, f.PathOf("link"), 0, Hook(f), TC_H_MAKE(prio << 16, htons(ETH_P_ALL)));
  r.b.Str(TCA_KIND, "u32");
  // Same layout as `tc filter add ... protocol all u32 match u8 0 0 action mirred egress
  // redirect dev Y`: the action list first, then a selector with one all-zero key (mask 0
  // matches every packet).
  size_t options = r.b.Begin(TCA_OPTIONS);
  size_t acts = r.b.Begin(TCA_U32_ACT);
  size_t first = r.b.Begin(1);  // action order 1
  r.b.Str(TCA_ACT_KIND, "mirred");
  size_t actOpts = r.b.Begin(TCA_ACT_OPTIONS | NLA_F_NESTED);
  tc_mirred mirred{};
  mirred.action = TC_ACT_STOLEN;
  mirred.eaction = TCA_EGRESS_REDIR;
  size_t parms = r.b.Attr(TCA_MIRRED_PARMS, &mirred, sizeof mirred);
  r.LinkAt(parms + offsetof(tc_mirred, ifindex), f.Link("redirectTo"), f.PathOf("redirectTo"), false);
  r.b.End(actOpts);
  r.b.End(first);
  r.b.End(acts);
  tc_u32_sel sel{};
  sel.flags = TC_U32_TERMINAL;
  sel.nkeys = 1;
  tc_u32_key key{};  // mask 0, value 0: matches everything
  uint8_t selBytes[sizeof sel + sizeof key];
  std::memcpy(selBytes, &sel, sizeof sel);
  std::memcpy(selBytes + sizeof sel, &key, sizeof key);
  r.b.Attr(TCA_U32_SEL, selBytes, sizeof selBytes);
  r.b.End(options);
  PreparedOp op;
  op.name = "filter.add";
  op.requests.push_back(r.Done());
  return op;
}

PreparedOp PrepareFilterDel(const Fields& f) {
  LinkRef link = f.Link("link");
  // Without prio every filter on the hook goes (tcm_info 0 names the whole chain).
  uint32_t prio = f.OptU32("prio", 1, 0xFFFF).value_or(0);
  RequestBuilder r(RTM_DELTFILTER, NLM_F_REQUEST | NLM_F_ACK);
  TcHeader(r, link, f.PathOf("link"), 0, Hook(f), TC_H_MAKE(prio << 16, 0));
  PreparedOp op;
  op.name = "filter.del";
  op.requests.push_back(r.Done());
  op.ignoreMissing = f.Bool("ignoreMissing", false);
  op.missingErrnos = {ENOENT, EINVAL, ENODEV};
  return op;
}

PreparedOp PrepareFilterList(const Fields& f) {
  LinkRef link = f.Link("link");
  RequestBuilder r(RTM_GETTFILTER, NLM_F_REQUEST | NLM_F_DUMP, ReplyKind::Filters);
  TcHeader(r, link, f.PathOf("link"), 0, Hook(f), 0);
  PreparedOp op;
  op.name = "filter.list";
  op.requests.push_back(r.Done());
  return op;
}

bool ParseQdisc(const Message& m, QdiscInfo* out) {
  const auto* h = reinterpret_cast<const nlmsghdr*>(m.data());
  if (h->nlmsg_type != RTM_NEWQDISC || h->nlmsg_len < NLMSG_LENGTH(sizeof(tcmsg))) return false;
  const auto* t = static_cast<const tcmsg*>(NLMSG_DATA(h));
  out->index = static_cast<uint32_t>(t->tcm_ifindex);
  out->handle = FormatHandle(t->tcm_handle);
  out->parent = FormatHandle(t->tcm_parent);
  Attr a, options;
  bool hasOptions = false;
  AttrIter it = MessageAttrs(h, sizeof(tcmsg));
  while (it.Next(&a)) {
    if (a.type == TCA_KIND) out->kind = a.Str();
    if (a.type == TCA_OPTIONS) {
      options = a;
      hasOptions = true;
    }
  }
  if (hasOptions && out->kind == "tbf") ParseTbfOptions(options, out);
  return true;
}

namespace {

// The first mirred action's target ifindex in a TCA_U32_ACT / TCA_*_ACT list.
std::optional<uint32_t> MirredTarget(const Attr& acts) {
  AttrIter it(acts);
  Attr act;
  while (it.Next(&act)) {
    Attr kind, opts, parms;
    if (!FindAttr(act, TCA_ACT_KIND, &kind) || kind.Str() != "mirred") continue;
    if (!FindAttr(act, TCA_ACT_OPTIONS, &opts) || !FindAttr(opts, TCA_MIRRED_PARMS, &parms)) continue;
    tc_mirred m;
    if (parms.As(&m)) return m.ifindex;
  }
  return std::nullopt;
}

}  // namespace

bool ParseFilter(const Message& m, FilterInfo* out) {
  const auto* h = reinterpret_cast<const nlmsghdr*>(m.data());
  if (h->nlmsg_type != RTM_NEWTFILTER || h->nlmsg_len < NLMSG_LENGTH(sizeof(tcmsg))) return false;
  const auto* t = static_cast<const tcmsg*>(NLMSG_DATA(h));
  out->index = static_cast<uint32_t>(t->tcm_ifindex);
  out->prio = TC_H_MAJ(t->tcm_info) >> 16;
  out->protocol = ntohs(static_cast<uint16_t>(TC_H_MIN(t->tcm_info)));
  Attr a, options;
  bool hasOptions = false;
  AttrIter it = MessageAttrs(h, sizeof(tcmsg));
  while (it.Next(&a)) {
    if (a.type == TCA_KIND) out->kind = a.Str();
    if (a.type == TCA_OPTIONS) {
      options = a;
      hasOptions = true;
    }
  }
  // The dump also lists each classifier's head and, for u32, its hash tables; a filter proper
  // has options, and a u32 one has a selector.
  if (!hasOptions) return false;
  if (out->kind == "u32") {
    Attr sel, acts;
    if (!FindAttr(options, TCA_U32_SEL, &sel)) return false;
    if (FindAttr(options, TCA_U32_ACT, &acts)) out->redirectTo = MirredTarget(acts);
  }
  return true;
}

}  // namespace knit::nl
