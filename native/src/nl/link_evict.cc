// link.evict: takes back a pod netns from the devices knit left in it, before new ones go in.
// ReclaimParkedName (below) does the same for one name: a host end Detach parked under its own
// name (down, off the bridge, in the reap group), when a new link wants that name before the
// reaper has deleted it.
// A detached sandbox's pod-end veth keeps its name and its addresses and routes (on a link
// without carrier) until the reaper deletes the pair: Detach retires only the host end, since
// the host netns cannot rename a device in another netns (docs/peer-retire.md). An attach into
// the same netns first moves those leftovers aside, as Detach once did itself: down (which
// takes their routes), renamed kxe<ifindex>, into the reap group. Only devices whose alias is
// knit's tag are touched, and never the live interfaces of the sandbox that is attaching.
#include <errno.h>

#include <optional>
#include <linux/if.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>

#include "nl/families.h"

namespace knit::nl {

namespace {

// Renames the link (which must be down) to `to`, and puts it in `group` when given.
int Rename(Socket& s, uint32_t index, const std::string& to, std::optional<uint32_t> group, std::string* extack) {
  Builder b(RTM_NEWLINK, kAck);
  ifinfomsg ifi{};
  ifi.ifi_index = static_cast<int>(index);
  b.Struct(&ifi, sizeof ifi);
  b.Str(IFLA_IFNAME, to);
  if (group) b.U32(IFLA_GROUP, *group);
  return s.Transact(std::move(b.Bytes()), nullptr, extack);
}

}  // namespace

int ReclaimParkedName(RunContext& ctx, const std::string& name, uint32_t group, const std::string& tagPrefix, OpError* err) {
  LinkInfo l;
  int rc = GetLinkByName(*ctx.socket, name, &l, &err->extack);
  if (rc == -ENODEV) return 0;  // the name is free: what was taken is another one (a veth's peer)
  if (rc < 0) {
    err->context = "look up link " + name + " (its name is taken)";
    return rc;
  }
  bool parked = l.group == group && !l.up && l.alias && l.alias->compare(0, tagPrefix.size(), tagPrefix) == 0;
  if (!parked) return 0;  // someone else's, or knit's and in use: the create fails with EEXIST
  if (ctx.linkIndex) ctx.linkIndex->clear();
  const std::string rename = "kxr" + std::to_string(l.index);
  rc = Rename(*ctx.socket, l.index, rename, std::nullopt, &err->extack);
  if (rc == -ENODEV) return 1;  // the reaper took it meanwhile: the name is free all the same
  if (rc < 0) {
    err->context = "move aside link " + name + " (knit's, parked for the reaper) as " + rename;
    return rc;
  }
  return 1;
}

PreparedOp PrepareLinkEvict(const Fields& f) {
  const std::string prefix = f.Str("tagPrefix");
  if (prefix.empty()) f.RangeFail("tagPrefix", "must not be empty: it is what makes a device knit's");
  const std::string spare = f.Str("sparePrefix");
  const std::string claim = f.Str("claim");
  const uint32_t group = f.U32("group", 1, UINT32_MAX);
  PreparedOp op;
  op.name = "link.evict";
  op.custom = [=](RunContext& ctx, OpResult* res, OpError* err) {
    Builder dump(RTM_GETLINK, NLM_F_REQUEST | NLM_F_DUMP);
    ifinfomsg gi{};
    dump.Struct(&gi, sizeof gi);
    dump.U32(IFLA_EXT_MASK, RTEXT_FILTER_SKIP_STATS);
    std::vector<Message> replies;
    int rc = ctx.socket->Transact(std::move(dump.Bytes()), &replies, &err->extack);
    if (rc < 0) {
      err->context = "list links";
      return rc;
    }
    std::vector<uint32_t> leftovers;
    for (const auto& m : replies) {
      LinkInfo l;
      if (!ParseLink(m, &l) || !l.alias || l.group == group) continue;  // not tagged, or already retired
      const std::string& a = *l.alias;
      bool knits = a.compare(0, prefix.size(), prefix) == 0;
      bool live = !spare.empty() && a.compare(0, spare.size(), spare) == 0 && a != claim;
      if (knits && !live) leftovers.push_back(l.index);
    }
    if (leftovers.empty()) {
      res->skipped = true;
      return 0;
    }
    // Names move: no index an earlier op of this batch looked up may be trusted now.
    if (ctx.linkIndex) ctx.linkIndex->clear();
    for (uint32_t index : leftovers) {
      // A link must be down to be renamed, and the kernel renames before it applies flags: two
      // requests. Named after its ifindex: unique in this netns while it waits for the reaper.
      const std::string rename = "kxe" + std::to_string(index);
      rc = SetLinkUp(*ctx.socket, index, false, &err->extack);
      if (rc == 0) rc = Rename(*ctx.socket, index, rename, group, &err->extack);
      if (rc == -ENODEV) continue;  // gone meanwhile: nothing left to move
      if (rc < 0) {
        err->context = "move aside link " + std::to_string(index) + " (knit's, left by a detached sandbox) as " + rename;
        return rc;
      }
      res->index = index;
    }
    return 0;
  };
  return op;
}

}  // namespace knit::nl
