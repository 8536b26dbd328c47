// Watching a network namespace for link and address changes (rtnetlink multicast groups).
//
// A NETLINK_ROUTE socket reports the namespace it was created in, so a netns worker thread
// creates it inside the target netns; after that a reader thread owned by the monitor
// receives, parses and hands batches of events to a sink. Why a thread and not uv_poll on
// the JS loop: Node-API gives no portable libuv headers (node-api-headers ships none), the
// parse work for a burst (thousands of links going away at once) stays off the event loop,
// and the kernel buffer keeps draining while JS is busy, which makes overruns rarer.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "errors.h"

namespace knit {

enum MonitorGroup : unsigned {
  kGroupLink = 1u << 0,
  kGroupIpv4Addr = 1u << 1,
  kGroupIpv6Addr = 1u << 2,
};

struct RtEvent {
  enum Type { kLink, kAddress, kOverrun, kError } type = kLink;
  bool removed = false;
  int index = 0;
  // link
  std::string name;
  bool up = false;       // IFF_UP: administratively up
  bool lowerUp = false;  // IFF_LOWER_UP: carrier
  int operstate = 0;     // IF_OPER_* (RFC 2863)
  std::string kind;      // IFLA_INFO_KIND, empty when the kernel sent none
  // address
  int family = 0;  // AF_INET / AF_INET6
  std::string address;
  int prefixLen = 0;
  // error
  int err = 0;
};

// Parses a buffer of rtnetlink messages, appending link/address events (others are skipped).
void ParseRtnl(const char* buf, size_t len, std::vector<RtEvent>* out);

class RtMonitor {
 public:
  using Sink = std::function<void(std::vector<RtEvent>&&)>;

  // Opens the socket in the netns at nsPath (empty: the caller's), joined to groups (a mask of
  // MonitorGroup); rcvbufBytes > 0 sets the kernel receive buffer (default 4 MiB).
  static int Open(const std::string& nsPath, unsigned groups, int rcvbufBytes, std::unique_ptr<RtMonitor>* out,
                  OpError* err);
  ~RtMonitor();

  // Starts the reader thread; sink runs on it. Call once.
  int Start(Sink sink);
  // While paused the socket is not read; the kernel queues events until its buffer is full,
  // then drops them and the next read after Resume reports an overrun.
  void Pause();
  void Resume();
  // Stops and joins the reader thread and closes both fds. Idempotent.
  void Stop();

 private:
  RtMonitor(int sock, int wake) : sock_(sock), wake_(wake) {}
  void Run();
  void Wake();

  int sock_;
  int wake_;  // eventfd: tells the reader to re-check state_
  enum State { kRunning, kPaused, kStopping };
  std::atomic<int> state_{kRunning};
  Sink sink_;
  std::thread reader_;
};

}  // namespace knit
