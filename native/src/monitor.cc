#include "monitor.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/if.h>
#include <linux/if_addr.h>
#include <linux/if_link.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include "netlink_reader.h"

namespace knit {
namespace {

constexpr int kDefaultRcvbuf = 4 << 20;
constexpr size_t kRecvBuf = 64 << 10;
constexpr size_t kMaxBatch = 1024;

int Fail(OpError* err, int errnum, std::string context) {
  err->err = errnum;
  err->context = std::move(context);
  return -errnum;
}

// Walks the rtattrs of one message; fn(type, payload, payloadLen).
template <typename Fn>
void ForEachAttr(const struct rtattr* rta, int len, Fn fn) {
  for (; RTA_OK(rta, len); rta = RTA_NEXT(rta, len)) {
    fn(rta->rta_type & NLA_TYPE_MASK, static_cast<const char*>(RTA_DATA(rta)), RTA_PAYLOAD(rta));
  }
}

std::string AttrString(const char* p, size_t n) { return std::string(p, strnlen(p, n)); }

void ParseLink(const struct nlmsghdr* h, std::vector<RtEvent>* out) {
  if (h->nlmsg_len < NLMSG_LENGTH(sizeof(struct ifinfomsg))) return;
  auto* ifi = static_cast<const struct ifinfomsg*>(NLMSG_DATA(h));
  RtEvent e;
  e.type = RtEvent::kLink;
  e.removed = h->nlmsg_type == RTM_DELLINK;
  e.index = ifi->ifi_index;
  e.up = ifi->ifi_flags & IFF_UP;
  e.lowerUp = ifi->ifi_flags & IFF_LOWER_UP;
  ForEachAttr(IFLA_RTA(ifi), static_cast<int>(IFLA_PAYLOAD(h)), [&](int type, const char* p, size_t n) {
    if (type == IFLA_IFNAME) e.name = AttrString(p, n);
    else if (type == IFLA_OPERSTATE && n >= 1) e.operstate = static_cast<unsigned char>(p[0]);
    else if (type == IFLA_LINKINFO) {
      ForEachAttr(reinterpret_cast<const struct rtattr*>(p), static_cast<int>(n), [&](int t, const char* q, size_t m) {
        if (t == IFLA_INFO_KIND) e.kind = AttrString(q, m);
      });
    }
  });
  out->push_back(std::move(e));
}

void ParseAddr(const struct nlmsghdr* h, std::vector<RtEvent>* out) {
  if (h->nlmsg_len < NLMSG_LENGTH(sizeof(struct ifaddrmsg))) return;
  auto* ifa = static_cast<const struct ifaddrmsg*>(NLMSG_DATA(h));
  if (ifa->ifa_family != AF_INET && ifa->ifa_family != AF_INET6) return;
  RtEvent e;
  e.type = RtEvent::kAddress;
  e.removed = h->nlmsg_type == RTM_DELADDR;
  e.index = static_cast<int>(ifa->ifa_index);
  e.family = ifa->ifa_family;
  e.prefixLen = ifa->ifa_prefixlen;
  // IFA_LOCAL is the interface's own address; IFA_ADDRESS is the peer's on point-to-point
  // links and equal to IFA_LOCAL otherwise. IPv6 sends only IFA_ADDRESS (unless a peer is set).
  std::string local, address;
  size_t want = e.family == AF_INET ? 4 : 16;
  ForEachAttr(IFA_RTA(ifa), static_cast<int>(IFA_PAYLOAD(h)), [&](int type, const char* p, size_t n) {
    if ((type != IFA_LOCAL && type != IFA_ADDRESS) || n < want) return;
    char text[INET6_ADDRSTRLEN];
    if (!inet_ntop(e.family, p, text, sizeof(text))) return;
    (type == IFA_LOCAL ? local : address) = text;
  });
  e.address = local.empty() ? address : local;
  if (e.address.empty()) return;
  out->push_back(std::move(e));
}

}  // namespace

void ParseRtnl(const char* buf, size_t len, std::vector<RtEvent>* out) {
  int remaining = static_cast<int>(len);
  for (auto* h = reinterpret_cast<const struct nlmsghdr*>(buf); NLMSG_OK(h, remaining); h = NLMSG_NEXT(h, remaining)) {
    switch (h->nlmsg_type) {
      case RTM_NEWLINK:
      case RTM_DELLINK: ParseLink(h, out); break;
      case RTM_NEWADDR:
      case RTM_DELADDR: ParseAddr(h, out); break;
      default: break;
    }
  }
}

int RtMonitor::Open(const std::string& nsPath, unsigned groups, int rcvbufBytes, std::unique_ptr<RtMonitor>* out,
                    OpError* err) {
  int sock = OpenNetlinkIn(nsPath, NETLINK_ROUTE, rcvbufBytes > 0 ? rcvbufBytes : kDefaultRcvbuf, "rtnetlink monitor", err);
  if (sock < 0) return sock;
  std::string where = NetnsName(nsPath);
  struct sockaddr_nl addr = {};
  addr.nl_family = AF_NETLINK;
  if (groups & kGroupLink) addr.nl_groups |= RTMGRP_LINK;
  if (groups & kGroupIpv4Addr) addr.nl_groups |= RTMGRP_IPV4_IFADDR;
  if (groups & kGroupIpv6Addr) addr.nl_groups |= RTMGRP_IPV6_IFADDR;
  if (bind(sock, reinterpret_cast<struct sockaddr*>(&addr), sizeof(addr)) < 0) {
    int e = errno;
    close(sock);
    return Fail(err, e, "subscribe rtnetlink monitor in " + where);
  }
  int wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake < 0) {
    int e = errno;
    close(sock);
    return Fail(err, e, "eventfd for rtnetlink monitor");
  }
  out->reset(new RtMonitor(sock, wake));
  return 0;
}

RtMonitor::~RtMonitor() { Stop(); }

int RtMonitor::Start(Sink sink) {
  sink_ = std::move(sink);
  reader_ = std::thread([this] { Run(); });
  return 0;
}

void RtMonitor::Wake() {
  uint64_t one = 1;
  ssize_t n = write(wake_, &one, sizeof(one));
  (void)n;  // EAGAIN means a wake-up is already pending: as good
}

void RtMonitor::Pause() {
  int expected = kRunning;
  if (state_.compare_exchange_strong(expected, kPaused)) Wake();
}

void RtMonitor::Resume() {
  int expected = kPaused;
  if (state_.compare_exchange_strong(expected, kRunning)) Wake();
}

void RtMonitor::Stop() {
  if (sock_ < 0) return;
  state_ = kStopping;
  Wake();
  if (reader_.joinable()) reader_.join();
  close(sock_);
  close(wake_);
  sock_ = wake_ = -1;
}

void RtMonitor::Run() {
  std::vector<char> buf(kRecvBuf);
  for (;;) {
    int state = state_;
    if (state == kStopping) return;
    // While paused the socket is left out entirely: poll would otherwise keep reporting
    // POLLERR once the kernel queues ENOBUFS, and spin.
    struct pollfd fds[2] = {{wake_, POLLIN, 0}, {state == kRunning ? sock_ : -1, POLLIN, 0}};
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      RtEvent e;
      e.type = RtEvent::kError;
      e.err = errno;
      sink_({e});
      return;
    }
    if (fds[0].revents) {
      uint64_t v;
      ssize_t n = read(wake_, &v, sizeof(v));
      (void)n;
      continue;
    }
    if (!fds[1].revents) continue;

    std::vector<RtEvent> batch;
    // Only the kernel speaks for the namespace; the kernel's ENOBUFS is an overrun.
    bool fatal = !DrainNetlink(sock_, &buf, kMaxBatch, &batch, [&](const char* data, size_t n) { ParseRtnl(data, n, &batch); });
    if (!batch.empty()) sink_(std::move(batch));
    if (fatal) return;
  }
}

}  // namespace knit
