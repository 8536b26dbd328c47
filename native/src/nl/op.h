// An op from src/net/ops.ts after parsing on the JS thread: the netlink requests it sends, in
// order, plus whatever must be looked up or done when it runs.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "errors.h"
#include "nl/results.h"
#include "nl/socket.h"

namespace knit::nl {

// A u32 slot in a request that can only be filled when the op runs:
//  - kLink: the ifindex of a link named by name (earlier ops in the same batch may create or
//    rename it), looked up with an RTM_GETLINK for that name;
//  - kNetns: an IFLA_NET_NS_FD, opened from a path just before the request is sent and closed
//    right after, so a missing netns fails this op (not the batch before it started).
struct Fixup {
  enum Kind { kLink, kNetns };
  Kind kind = kLink;
  size_t offset = 0;
  std::string name;      // link name or netns path
  std::string field;     // "ops[1].link", for errors
  bool subject = false;  // the op's own link: its index is reported as OpResult.index
};

// How to read the data replies of a request.
enum class ReplyKind { None, Echo, Link, Links, Addrs, Routes, Neighs, Fdb, Qdiscs, Filters };

struct Request {
  Message bytes;
  std::vector<Fixup> fixups;
  ReplyKind reply = ReplyKind::None;
  // For ReplyKind::Echo: the name to look the new link up by if the kernel sent no echo.
  std::string echoName;
  uint32_t subjectIndex = 0;  // the op's own link when given by number
};

// What a non-netlink op (tun, sysctl) gets to work with.
struct RunContext {
  Socket* socket;
  int nsfd;  // the handle's netns, -1 for the daemon's own
  // Link names looked up during the current batch (name -> ifindex), so a batch that names
  // eth0 in five ops asks the kernel once. RunBatch owns it; any request that may rename,
  // move or delete a link empties it.
  std::unordered_map<std::string, uint32_t>* linkIndex = nullptr;
};

struct PreparedOp {
  std::string name;  // "link.add"
  std::vector<Request> requests;
  bool ignoreMissing = false;
  std::vector<int> missingErrnos;  // positive errnos that mean "already gone" for this op
  // Non-netlink work; returns 0 or -errno and may set err->context.
  std::function<int(RunContext&, OpResult*, OpError*)> custom;
  // link.add: work that needs the new link's ifindex (the kernel ignores IFLA_IFALIAS when
  // creating a link, so aliases are set by a follow-up request).
  std::function<int(RunContext&, const LinkInfo& created, OpError*)> afterCreate;
  // link.add whose own name may be held by a device knit parked for the reaper (Detach keeps a
  // host end's name): on EEXIST that device is renamed aside once and the request sent again.
  std::function<int(RunContext&, OpError*)> reclaimName;
  // link.add of a veth whose peer name may be taken in the peer's netns: the same request with
  // the peer's other name, sent once if the kernel answers EEXIST to the first.
  std::optional<Request> ifExists;
  // Runs after all requests, e.g. keeping only the entries of one link.
  std::function<void(OpResult*)> filter;
};

}  // namespace knit::nl
