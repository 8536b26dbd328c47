#include "nl/exec.h"

#include <errno.h>
#include <linux/if.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <unistd.h>

#include <algorithm>

#include "netns.h"
#include "nl/families.h"

namespace knit::nl {

// One link by name (RTM_GETLINK with IFLA_IFNAME: the kernel looks it up, no dump).
int GetLinkByName(Socket& s, const std::string& name, LinkInfo* out, std::string* extack) {
  Builder b(RTM_GETLINK, NLM_F_REQUEST | NLM_F_ACK);
  ifinfomsg ifi{};
  b.Struct(&ifi, sizeof ifi);
  b.Str(IFLA_IFNAME, name);
  b.U32(IFLA_EXT_MASK, RTEXT_FILTER_SKIP_STATS);
  std::vector<Message> replies;
  int rc = s.Transact(std::move(b.Bytes()), &replies, extack);
  if (rc < 0) return rc;
  for (const auto& m : replies)
    if (ParseLink(m, out)) return 0;
  return -ENODEV;
}

int SetLinkUp(Socket& s, uint32_t index, bool up, std::string* extack) {
  Builder b(RTM_NEWLINK, kAck);
  ifinfomsg ifi{};
  ifi.ifi_index = static_cast<int>(index);
  ifi.ifi_change = IFF_UP;
  ifi.ifi_flags = up ? IFF_UP : 0;
  b.Struct(&ifi, sizeof ifi);
  return s.Transact(std::move(b.Bytes()), nullptr, extack);
}

namespace {

// The ifindex an earlier op of this batch looked up for name, if nothing since may have
// renamed, moved or deleted a link.
const uint32_t* CachedIndex(const RunContext& ctx, const std::string& name) {
  if (!ctx.linkIndex) return nullptr;
  auto it = ctx.linkIndex->find(name);
  return it == ctx.linkIndex->end() ? nullptr : &it->second;
}

// Fills the request's run-time slots. Opened netns fds go to *fds for the caller to close.
int ApplyFixups(RunContext& ctx, Request& req, Message* bytes, OpResult* res, OpError* err, std::vector<int>* fds) {
  for (const Fixup& fx : req.fixups) {
    uint32_t value = 0;
    if (fx.kind == Fixup::kLink) {
      const uint32_t* known = CachedIndex(ctx, fx.name);
      if (known) {
        value = *known;
      } else {
        LinkInfo found;
        int rc = GetLinkByName(*ctx.socket, fx.name, &found, &err->extack);
        if (rc < 0) {
          err->context = "look up link " + fx.name + " (" + fx.field + ")";
          return rc;
        }
        value = found.index;
        if (ctx.linkIndex) (*ctx.linkIndex)[fx.name] = value;
      }
      if (fx.subject) res->index = value;
    } else {
      OpError open;
      int fd = OpenNetns(fx.name, &open);
      if (fd < 0) {
        err->context = (open.context.empty() ? "open netns " + fx.name : open.context) + " (" + fx.field + ")";
        return fd;
      }
      fds->push_back(fd);
      value = static_cast<uint32_t>(fd);
    }
    std::memcpy(bytes->data() + fx.offset, &value, 4);
  }
  return 0;
}

// True when a request may change which link a name stands for in this netns: a delete (a
// veth's peer and a macvtap's upper go with it), a rename (an index plus IFLA_IFNAME), or a
// move to another netns. Creating a link only adds a name, which no lookup has cached.
bool MayChangeLinkNames(const Message& m) {
  if (m.size() < NLMSG_HDRLEN + sizeof(ifinfomsg)) return false;
  const auto* h = reinterpret_cast<const nlmsghdr*>(m.data());
  if (h->nlmsg_type == RTM_DELLINK) return true;
  if (h->nlmsg_type != RTM_NEWLINK && h->nlmsg_type != RTM_SETLINK) return false;
  const auto* ifi = reinterpret_cast<const ifinfomsg*>(m.data() + NLMSG_HDRLEN);
  size_t off = NLMSG_HDRLEN + NLMSG_ALIGN(sizeof(ifinfomsg));
  const size_t end = std::min<size_t>(h->nlmsg_len, m.size());
  while (off + sizeof(rtattr) <= end) {
    const auto* a = reinterpret_cast<const rtattr*>(m.data() + off);
    if (a->rta_len < sizeof(rtattr)) break;
    const uint16_t type = a->rta_type & NLA_TYPE_MASK;
    if (type == IFLA_IFNAME && ifi->ifi_index != 0) return true;
    if (type == IFLA_NET_NS_FD || type == IFLA_NET_NS_PID || type == IFLA_TARGET_NETNSID) return true;
    off += RTA_ALIGN(a->rta_len);
  }
  return false;
}

template <typename T, typename Parse>
void Collect(const std::vector<Message>& replies, std::optional<std::vector<T>>* out, Parse parse) {
  if (!*out) out->emplace();
  for (const auto& m : replies) {
    T item;
    if (parse(m, &item)) (*out)->push_back(std::move(item));
  }
}

// The link a create request made: from the kernel's echo, or (kernels before 6.3 send none)
// by asking for it by name.
int CreatedLink(RunContext& ctx, const Request& req, const std::vector<Message>& replies, LinkInfo* out) {
  for (const auto& m : replies)
    if (ParseLink(m, out)) return 0;
  if (req.echoName.empty()) return -ENODEV;
  std::string ignored;
  return GetLinkByName(*ctx.socket, req.echoName, out, &ignored);
}

int ReadReplies(RunContext& ctx, const PreparedOp& op, const Request& req, const std::vector<Message>& replies, OpResult* res,
                OpError* err) {
  switch (req.reply) {
    case ReplyKind::None: break;
    case ReplyKind::Echo: {
      LinkInfo created;
      if (CreatedLink(ctx, req, replies, &created) < 0) break;  // made, but we cannot see it: no index to report
      res->index = created.index;
      if (op.afterCreate) {
        int rc = op.afterCreate(ctx, created, err);
        if (rc < 0) {
          // A failed op must leave nothing behind: take the half-made link away again.
          Builder del(RTM_DELLINK, NLM_F_REQUEST | NLM_F_ACK);
          ifinfomsg ifi{};
          ifi.ifi_index = static_cast<int>(created.index);
          del.Struct(&ifi, sizeof ifi);
          std::string ignored;
          ctx.socket->Transact(std::move(del.Bytes()), nullptr, &ignored);
          res->index = 0;
          return rc;
        }
      }
      break;
    }
    case ReplyKind::Link: {
      LinkInfo link;
      for (const auto& m : replies) {
        if (ParseLink(m, &link)) {
          res->index = link.index;
          res->link = std::move(link);
          break;
        }
      }
      if (!res->link) return -ENODEV;
      break;
    }
    case ReplyKind::Links: Collect(replies, &res->links, ParseLink); break;
    case ReplyKind::Addrs: Collect(replies, &res->addrs, ParseAddr); break;
    case ReplyKind::Routes: Collect(replies, &res->routes, ParseRoute); break;
    case ReplyKind::Neighs: Collect(replies, &res->neighs, ParseNeigh); break;
    case ReplyKind::Fdb: Collect(replies, &res->fdb, ParseFdb); break;
    case ReplyKind::Qdiscs: Collect(replies, &res->qdiscs, ParseQdisc); break;
    case ReplyKind::Filters: Collect(replies, &res->filters, ParseFilter); break;
  }
  return 0;
}

int RunOp(RunContext& ctx, PreparedOp& op, OpResult* res, OpError* err) {
  if (op.custom) return op.custom(ctx, res, err);
  for (size_t r = 0; r < op.requests.size();) {
    Request& req = op.requests[r];
    if (req.subjectIndex) res->index = req.subjectIndex;
    Message bytes = req.bytes;
    std::vector<int> fds;
    int rc = ApplyFixups(ctx, req, &bytes, res, err, &fds);
    std::vector<Message> replies;
    if (rc == 0) {
      if (ctx.linkIndex && MayChangeLinkNames(bytes)) ctx.linkIndex->clear();
      rc = ctx.socket->Transact(std::move(bytes), &replies, &err->extack);
      if (rc < 0) err->context = op.name;
    }
    for (int fd : fds) close(fd);
    if (rc == -EEXIST && r == 0 && op.reclaimName) {
      auto reclaim = std::move(op.reclaimName);
      op.reclaimName = nullptr;
      OpError why;
      int freed = reclaim(ctx, &why);
      if (freed < 0) {
        *err = why;
        return freed;
      }
      if (freed > 0) {
        *err = OpError{};
        continue;  // the same request again, under the name now free
      }
    }
    if (rc == -EEXIST && r == 0 && op.ifExists) {
      // Once, with the other name: the fallback request replaces the first.
      op.requests[0] = std::move(*op.ifExists);
      op.ifExists.reset();
      *err = OpError{};
      continue;
    }
    if (rc == 0) rc = ReadReplies(ctx, op, req, replies, res, err);
    if (rc < 0) return rc;
    r++;
  }
  if (op.filter) op.filter(res);
  return 0;
}

}  // namespace

int RunBatch(RunContext& ctx, std::vector<PreparedOp>& ops, std::vector<OpResult>* results, OpError* err) {
  std::unordered_map<std::string, uint32_t> linkIndex;
  ctx.linkIndex = &linkIndex;
  struct Reset { RunContext& c; ~Reset() { c.linkIndex = nullptr; } } reset{ctx};
  for (size_t i = 0; i < ops.size(); i++) {
    PreparedOp& op = ops[i];
    OpResult res;
    OpError opErr;
    int rc = RunOp(ctx, op, &res, &opErr);
    if (rc < 0) {
      bool missing = std::find(op.missingErrnos.begin(), op.missingErrnos.end(), -rc) != op.missingErrnos.end();
      if (!(op.ignoreMissing && missing)) {
        *err = opErr;
        err->err = -rc;
        err->index = static_cast<int>(i);
        return rc;
      }
      res = OpResult{};
      res.skipped = true;
    }
    results->push_back(std::move(res));
  }
  return 0;
}

int EncodeOp(RunContext& ctx, PreparedOp& op, std::vector<uint8_t>* out, OpError* err) {
  if (op.custom) {
    err->err = EINVAL;
    err->context = op.name + " is not a netlink request and has no bytes to encode";
    return -EINVAL;
  }
  for (Request& req : op.requests) {
    Message bytes = req.bytes;
    std::vector<int> fds;
    OpResult ignored;
    int rc = ApplyFixups(ctx, req, &bytes, &ignored, err, &fds);
    for (int fd : fds) close(fd);
    if (rc < 0) {
      err->err = -rc;
      return rc;
    }
    out->insert(out->end(), bytes.begin(), bytes.end());
  }
  return 0;
}

}  // namespace knit::nl
