// Per object family: turning parsed op fields into requests, and replies into results.
// Each family lives in its own .cc (link, addr, route, neigh, tc, vf, local).
#pragma once
#include <linux/netlink.h>

#include <string>

#include "nl/fields.h"
#include "nl/message.h"
#include "nl/op.h"
#include "nl/results.h"

// Older uapi headers lack it: a link dump that leaves out the statistics.
#ifndef RTEXT_FILTER_SKIP_STATS
#define RTEXT_FILTER_SKIP_STATS (1 << 3)
#endif

namespace knit::nl {

// A change request whose outcome the kernel acknowledges.
inline constexpr uint16_t kAck = NLM_F_REQUEST | NLM_F_ACK;

// A request under construction plus the ifindex slots still to fill by name.
class RequestBuilder {
 public:
  RequestBuilder(uint16_t type, uint16_t flags, ReplyKind reply = ReplyKind::None) : b(type, flags), reply_(reply) {}
  Builder b;
  // Writes ref's index at offset now, or records a fixup to resolve its name at run time.
  void LinkAt(size_t offset, const LinkRef& ref, const std::string& field, bool subject);
  // Appends a u32 attribute holding ref's ifindex.
  void LinkAttr(uint16_t type, const LinkRef& ref, const std::string& field, bool subject = false);
  // Appends IFLA_NET_NS_FD for the netns at path, opened when the request is sent.
  void NetnsFdAttr(uint16_t type, const std::string& path, const std::string& field);
  std::string echoName;
  Request Done();

 private:
  std::vector<Fixup> fixups_;
  ReplyKind reply_;
  uint32_t subjectIndex_ = 0;
};

PreparedOp PrepareLinkAdd(const Fields& f);
PreparedOp PrepareLinkSet(const Fields& f);
PreparedOp PrepareLinkDel(const Fields& f);
PreparedOp PrepareLinkDelGroup(const Fields& f);
PreparedOp PrepareLinkGet(const Fields& f);
PreparedOp PrepareLinkList(const Fields& f);
PreparedOp PrepareLinkEvict(const Fields& f);  // link_evict.cc
// The link called `name` in ctx's netns, when it is knit's and parked for the reaper (in
// `group`, down, its alias starting with tagPrefix), is renamed out of the way: 1 when the name
// is free now, 0 when it was not parked (or not there), or -errno.
int ReclaimParkedName(RunContext& ctx, const std::string& name, uint32_t group, const std::string& tagPrefix, OpError* err);
PreparedOp PrepareAddr(const Fields& f, bool add);
PreparedOp PrepareAddrList(const Fields& f);
PreparedOp PrepareRoute(const Fields& f, const std::string& verb);
PreparedOp PrepareRouteList(const Fields& f);
// verb: "add" (fails if present), "replace" (creates or overwrites), "del".
PreparedOp PrepareNeigh(const Fields& f, const std::string& verb);
PreparedOp PrepareNeighList(const Fields& f);
PreparedOp PrepareFdb(const Fields& f, const std::string& verb);  // fdb.cc; verb "replace" or "del"
PreparedOp PrepareFdbList(const Fields& f);
PreparedOp PrepareQdisc(const Fields& f, bool add);
PreparedOp PrepareQdiscList(const Fields& f);
PreparedOp PrepareTbf(const Fields& f, bool add);  // tbf.cc
PreparedOp PrepareFilterAdd(const Fields& f);
PreparedOp PrepareFilterDel(const Fields& f);
PreparedOp PrepareFilterList(const Fields& f);
PreparedOp PrepareVfSet(const Fields& f);
PreparedOp PrepareSysctl(const Fields& f, bool set);
PreparedOp PrepareTunAdd(const Fields& f);
PreparedOp PrepareTunOpen(const Fields& f);

// Reply parsers; each returns false for a message of another type.
bool ParseLink(const Message& m, LinkInfo* out);
// One link by name (RTM_GETLINK with IFLA_IFNAME, no dump): 0, or -ENODEV when there is none.
int GetLinkByName(Socket& s, const std::string& name, LinkInfo* out, std::string* extack);  // exec.cc
// Sets one link up or down by ifindex: 0 or -errno.
int SetLinkUp(Socket& s, uint32_t index, bool up, std::string* extack);  // exec.cc
// tbf's TCA_OPTIONS in a qdisc dump: its rate (bytes/s) and queue limit (bytes).
void ParseTbfOptions(const Attr& options, QdiscInfo* out);
bool ParseAddr(const Message& m, AddrInfo* out);
bool ParseRoute(const Message& m, RouteInfo* out);
bool ParseNeigh(const Message& m, NeighInfo* out);
bool ParseFdb(const Message& m, FdbInfo* out);
bool ParseQdisc(const Message& m, QdiscInfo* out);
bool ParseFilter(const Message& m, FilterInfo* out);
// IFLA_VFINFO_LIST payload → one VfInfo per IFLA_VF_INFO.
void ParseVfList(const Attr& list, std::vector<VfInfo>* out);

}  // namespace knit::nl
