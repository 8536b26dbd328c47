// Ops that are not netlink requests but still belong to the handle's netns: sysctl writes and
// reads, and tun/tap creation. Both run on a netns worker thread (ns_thread.h) inside the netns.
#include <errno.h>

#include <cctype>

#include "nl/families.h"
#include "sysctl.h"
#include "tun.h"

namespace knit::nl {

namespace {

std::string SysctlKey(const Fields& f) {
  std::string key = f.Str("key");
  bool ok = !key.empty() && key.size() <= 255 && key.front() != '.' && key.back() != '.' && key.find("..") == std::string::npos;
  for (char c : key)
    if (c == '/' || c == '\0' || std::isspace(static_cast<unsigned char>(c))) ok = false;
  if (!ok) f.RangeFail("key", "'" + key + "' is not a sysctl key (dotted, e.g. net.ipv4.ip_forward)");
  return key;
}

}  // namespace

PreparedOp PrepareSysctl(const Fields& f, bool set) {
  std::string key = SysctlKey(f);
  PreparedOp op;
  op.name = set ? "sysctl.set" : "sysctl.get";
  if (set) {
    std::string value = f.Str("value");
    op.custom = [key, value](RunContext& ctx, OpResult*, OpError* err) {
      int rc = SysctlWrite(ctx.nsfd, key, value);
      if (rc < 0) err->context = "write sysctl " + key + " = '" + value + "'";
      return rc;
    };
  } else {
    op.custom = [key](RunContext& ctx, OpResult* res, OpError* err) {
      std::string value;
      int rc = SysctlRead(ctx.nsfd, key, &value);
      if (rc < 0) err->context = "read sysctl " + key;
      else res->value = value;
      return rc;
    };
  }
  return op;
}

PreparedOp PrepareTunAdd(const Fields& f) {
  TunSpec spec;
  spec.name = f.IfName("name");
  spec.tap = f.Enum("mode", {"tap", "tun"}) == "tap";
  spec.queues = static_cast<int>(f.OptU32("queues", 1, 256).value_or(1));
  if (auto owner = f.OptU32("owner")) spec.owner = *owner;
  if (auto group = f.OptU32("group")) spec.group = *group;
  spec.vnetHdr = f.Bool("vnetHdr", false);
  spec.persist = f.Bool("persist", true);
  spec.returnFds = f.Bool("returnFds", false);
  if (!spec.persist && !spec.returnFds)
    f.RangeFail("persist", "false without returnFds would remove the device as soon as it is made");
  PreparedOp op;
  op.name = "tun.add";
  op.custom = [spec](RunContext& ctx, OpResult* res, OpError* err) {
    std::vector<int> fds;
    int index = 0;
    int rc = TunCreate(ctx.nsfd, spec, &fds, &index);
    if (rc < 0) {
      err->context = std::string("create ") + (spec.tap ? "tap " : "tun ") + spec.name;
      return rc;
    }
    res->index = static_cast<uint32_t>(index);
    if (spec.returnFds) res->fds = fds;
    return 0;
  };
  return op;
}

PreparedOp PrepareTunOpen(const Fields& f) {
  TunSpec spec;
  spec.name = f.IfName("name");
  spec.tap = f.Enum("mode", {"tap", "tun"}) == "tap";
  spec.queues = static_cast<int>(f.OptU32("queues", 1, 256).value_or(1));
  spec.vnetHdr = f.Bool("vnetHdr", false);
  PreparedOp op;
  op.name = "tun.open";
  op.custom = [spec](RunContext& ctx, OpResult* res, OpError* err) {
    std::vector<int> fds;
    int index = 0;
    int rc = TunOpen(ctx.nsfd, spec, &fds, &index);
    if (rc < 0) {
      err->context = std::string("open queues of ") + (spec.tap ? "tap " : "tun ") + spec.name;
      return rc;
    }
    res->index = static_cast<uint32_t>(index);
    res->fds = fds;
    return 0;
  };
  return op;
}

}  // namespace knit::nl
