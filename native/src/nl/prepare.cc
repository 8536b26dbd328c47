#include "nl/prepare.h"

#include "nl/families.h"

namespace knit::nl {

PreparedOp PrepareOp(Napi::Value value, const std::string& path) {
  Fields f(value, path);
  const std::string name = f.Str("op");
  if (name == "link.add") return PrepareLinkAdd(f);
  if (name == "link.set") return PrepareLinkSet(f);
  if (name == "link.del") return PrepareLinkDel(f);
  if (name == "link.delGroup") return PrepareLinkDelGroup(f);
  if (name == "link.get") return PrepareLinkGet(f);
  if (name == "link.list") return PrepareLinkList(f);
  if (name == "link.evict") return PrepareLinkEvict(f);
  if (name == "addr.add" || name == "addr.del") return PrepareAddr(f, name == "addr.add");
  if (name == "addr.list") return PrepareAddrList(f);
  if (name == "route.add") return PrepareRoute(f, "add");
  if (name == "route.replace") return PrepareRoute(f, "replace");
  if (name == "route.del") return PrepareRoute(f, "del");
  if (name == "route.list") return PrepareRouteList(f);
  if (name == "neigh.add") return PrepareNeigh(f, "add");
  if (name == "neigh.replace") return PrepareNeigh(f, "replace");
  if (name == "neigh.del") return PrepareNeigh(f, "del");
  if (name == "neigh.list") return PrepareNeighList(f);
  if (name == "fdb.replace") return PrepareFdb(f, "replace");
  if (name == "fdb.del") return PrepareFdb(f, "del");
  if (name == "fdb.list") return PrepareFdbList(f);
  if (name == "qdisc.add" || name == "qdisc.del") return PrepareQdisc(f, name == "qdisc.add");
  if (name == "qdisc.list") return PrepareQdiscList(f);
  if (name == "filter.add") return PrepareFilterAdd(f);
  if (name == "filter.del") return PrepareFilterDel(f);
  if (name == "filter.list") return PrepareFilterList(f);
  if (name == "vf.set") return PrepareVfSet(f);
  if (name == "sysctl.set" || name == "sysctl.get") return PrepareSysctl(f, name == "sysctl.set");
  if (name == "tun.add") return PrepareTunAdd(f);
  if (name == "tun.open") return PrepareTunOpen(f);
  f.RangeFail("op", "unknown op '" + name + "'");
}

std::vector<PreparedOp> PrepareOps(Napi::Value value, const std::string& path) {
  if (!value.IsArray()) throw FieldError(FieldError::kType, path + ": expected an array of ops");
  Napi::Array arr = value.As<Napi::Array>();
  std::vector<PreparedOp> ops;
  ops.reserve(arr.Length());
  for (uint32_t i = 0; i < arr.Length(); i++) ops.push_back(PrepareOp(arr.Get(i), path + "[" + std::to_string(i) + "]"));
  return ops;
}

}  // namespace knit::nl
