#include "nl/to_js.h"

namespace knit::nl {

namespace {

template <typename T>
void SetOpt(Napi::Object o, const char* key, const std::optional<T>& v) {
  if (v) o.Set(key, *v);
}

void SetStr(Napi::Object o, const char* key, const std::string& v) {
  if (!v.empty()) o.Set(key, v);
}

Napi::Array Strings(Napi::Env env, const std::vector<std::string>& v) {
  Napi::Array a = Napi::Array::New(env, v.size());
  for (size_t i = 0; i < v.size(); i++) a.Set(i, v[i]);
  return a;
}

template <typename T>
Napi::Array List(Napi::Env env, const std::vector<T>& v, Napi::Object (*one)(Napi::Env, const T&)) {
  Napi::Array a = Napi::Array::New(env, v.size());
  for (size_t i = 0; i < v.size(); i++) a.Set(i, one(env, v[i]));
  return a;
}

Napi::Object Vf(Napi::Env env, const VfInfo& v) {
  Napi::Object o = Napi::Object::New(env);
  o.Set("vf", v.vf);
  o.Set("mac", v.mac);
  o.Set("vlan", v.vlan);
  o.Set("qos", v.qos);
  SetStr(o, "vlanProto", v.vlanProto);
  SetOpt(o, "spoofchk", v.spoofchk);
  SetOpt(o, "trust", v.trust);
  SetOpt(o, "minTxRate", v.minTxRate);
  SetOpt(o, "maxTxRate", v.maxTxRate);
  SetStr(o, "linkState", v.linkState);
  return o;
}

Napi::Object Link(Napi::Env env, const LinkInfo& l) {
  Napi::Object o = Napi::Object::New(env);
  o.Set("index", l.index);
  o.Set("name", l.name);
  SetStr(o, "kind", l.kind);
  o.Set("mtu", l.mtu);
  SetStr(o, "mac", l.mac);
  o.Set("up", l.up);
  o.Set("lowerUp", l.lowerUp);
  o.Set("operstate", l.operstate);
  SetOpt(o, "master", l.master);
  SetOpt(o, "alias", l.alias);
  o.Set("group", l.group);
  SetOpt(o, "txqlen", l.txqlen);
  SetOpt(o, "parentIndex", l.parentIndex);
  SetOpt(o, "linkNetnsId", l.linkNetnsId);
  SetOpt(o, "numTxQueues", l.numTxQueues);
  if (l.vfs) o.Set("vfs", List(env, *l.vfs, Vf));
  if (l.vxlan) {
    Napi::Object v = Napi::Object::New(env);
    v.Set("vni", l.vxlan->vni);
    v.Set("port", l.vxlan->port);
    SetStr(v, "local", l.vxlan->local);
    SetOpt(v, "dev", l.vxlan->dev);
    o.Set("vxlan", v);
  }
  if (l.bridge) {
    Napi::Object b = Napi::Object::New(env);
    b.Set("nfCallIptables", l.bridge->nfCallIptables);
    b.Set("nfCallIp6tables", l.bridge->nfCallIp6tables);
    o.Set("bridge", b);
  }
  return o;
}

Napi::Object Addr(Napi::Env env, const AddrInfo& a) {
  Napi::Object o = Napi::Object::New(env);
  o.Set("index", a.index);
  o.Set("family", a.family);
  o.Set("address", a.address);
  o.Set("prefixLen", a.prefixLen);
  SetStr(o, "peer", a.peer);
  o.Set("scope", a.scope);
  o.Set("flags", Strings(env, a.flags));
  return o;
}

Napi::Object Route(Napi::Env env, const RouteInfo& r) {
  Napi::Object o = Napi::Object::New(env);
  o.Set("family", r.family);
  o.Set("dst", r.dst);
  SetStr(o, "gateway", r.gateway);
  SetOpt(o, "index", r.index);
  o.Set("table", r.table);
  SetOpt(o, "metric", r.metric);
  o.Set("scope", r.scope);
  o.Set("protocol", r.protocol);
  o.Set("type", r.type);
  SetOpt(o, "mtu", r.mtu);
  if (r.onlink) o.Set("onlink", true);
  SetStr(o, "src", r.src);
  return o;
}

Napi::Object Neigh(Napi::Env env, const NeighInfo& n) {
  Napi::Object o = Napi::Object::New(env);
  o.Set("index", n.index);
  o.Set("family", n.family);
  o.Set("address", n.address);
  SetStr(o, "lladdr", n.lladdr);
  o.Set("state", Strings(env, n.state));
  o.Set("proxy", n.proxy);
  return o;
}

Napi::Object Fdb(Napi::Env env, const FdbInfo& e) {
  Napi::Object o = Napi::Object::New(env);
  o.Set("index", e.index);
  o.Set("mac", e.mac);
  SetStr(o, "dst", e.dst);
  o.Set("state", Strings(env, e.state));
  o.Set("self", e.self);
  SetOpt(o, "master", e.master);
  return o;
}

Napi::Object Qdisc(Napi::Env env, const QdiscInfo& q) {
  Napi::Object o = Napi::Object::New(env);
  o.Set("index", q.index);
  o.Set("kind", q.kind);
  o.Set("handle", q.handle);
  o.Set("parent", q.parent);
  if (q.rate) o.Set("rate", static_cast<double>(*q.rate));
  if (q.limit) o.Set("limit", *q.limit);
  return o;
}

Napi::Object Filter(Napi::Env env, const FilterInfo& f) {
  Napi::Object o = Napi::Object::New(env);
  o.Set("index", f.index);
  o.Set("kind", f.kind);
  o.Set("prio", f.prio);
  o.Set("protocol", f.protocol);
  SetOpt(o, "redirectTo", f.redirectTo);
  return o;
}

}  // namespace

Napi::Object ToJs(Napi::Env env, const LinkInfo& l) { return Link(env, l); }

Napi::Object ToJs(Napi::Env env, const OpResult& r) {
  Napi::Object o = Napi::Object::New(env);
  if (r.skipped) o.Set("skipped", true);
  if (r.index) o.Set("index", r.index);
  if (r.link) o.Set("link", Link(env, *r.link));
  if (r.links) o.Set("links", List(env, *r.links, Link));
  if (r.addrs) o.Set("addrs", List(env, *r.addrs, Addr));
  if (r.routes) o.Set("routes", List(env, *r.routes, Route));
  if (r.neighs) o.Set("neighs", List(env, *r.neighs, Neigh));
  if (r.fdb) o.Set("fdb", List(env, *r.fdb, Fdb));
  if (r.qdiscs) o.Set("qdiscs", List(env, *r.qdiscs, Qdisc));
  if (r.filters) o.Set("filters", List(env, *r.filters, Filter));
  if (r.value) o.Set("value", *r.value);
  if (r.fds) {
    Napi::Array a = Napi::Array::New(env, r.fds->size());
    for (size_t i = 0; i < r.fds->size(); i++) a.Set(i, (*r.fds)[i]);
    o.Set("fds", a);
  }
  return o;
}

Napi::Array ToJs(Napi::Env env, const std::vector<OpResult>& results) {
  Napi::Array a = Napi::Array::New(env, results.size());
  for (size_t i = 0; i < results.size(); i++) a.Set(i, ToJs(env, results[i]));
  return a;
}

}  // namespace knit::nl
