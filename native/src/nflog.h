// Reading the packets that nftables' `log group N` rules hand to userspace (nfnetlink_log,
// the NETLINK_NETFILTER subsystem NFNL_SUBSYS_ULOG; wire format from the kernel's uapi header
// linux/netfilter/nfnetlink_log.h). One socket bound to one group of one netns, asking for the
// first bytes of each packet (its IP and transport headers) and for each message at once
// (queue threshold 1: the rules are rate-limited, so there is never much to batch). A reader
// thread owned by the reader parses and hands batches to a sink, for the reasons monitor.h
// gives for its own thread.
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

struct NflogEvent {
  enum Type { kPacket, kOverrun, kError } type = kPacket;
  int family = 0;       // NFPROTO_IPV4 (2) or NFPROTO_IPV6 (10): nfgenmsg's family
  int hook = -1;        // NF_INET_* hook the rule ran in (NFULA_PACKET_HDR)
  std::string prefix;   // the rule's `log prefix`, NUL stripped (NFULA_PREFIX)
  uint32_t indev = 0;   // ifindexes (NFULA_IFINDEX_*), 0 when absent
  uint32_t outdev = 0;
  uint32_t physindev = 0;  // the bridge port, for bridged packets (br_netfilter)
  uint32_t physoutdev = 0;
  int64_t timeNs = 0;   // NFULA_TIMESTAMP, else when the reader received it (CLOCK_REALTIME)
  std::vector<uint8_t> payload;  // the network header onwards, at most the copy range
  int err = 0;          // kError
};

// Parses a buffer of nfnetlink messages, appending one event per logged packet (others,
// such as acks, are skipped). receivedNs stands in for packets without a timestamp.
void ParseNflog(const char* buf, size_t len, int64_t receivedNs, std::vector<NflogEvent>* out);

class NflogReader {
 public:
  using Sink = std::function<void(std::vector<NflogEvent>&&)>;

  // Opens a socket in the netns at nsPath (empty: the caller's) and binds it to group with
  // copyRange bytes of each packet. EBUSY: another socket of that netns holds the group.
  static int Open(const std::string& nsPath, uint16_t group, uint32_t copyRange, std::unique_ptr<NflogReader>* out,
                  OpError* err);
  ~NflogReader();

  // Starts the reader thread; sink runs on it. Call once.
  int Start(Sink sink);
  // Stops and joins the reader thread and closes both fds (the kernel unbinds the group
  // with the socket). Idempotent.
  void Stop();

 private:
  NflogReader(int sock, int wake) : sock_(sock), wake_(wake) {}
  void Run();

  int sock_;
  int wake_;  // eventfd: tells the reader to stop
  std::atomic<bool> stopping_{false};
  Sink sink_;
  std::thread reader_;
};

}  // namespace knit
