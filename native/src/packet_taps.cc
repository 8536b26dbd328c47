#include "packet_taps.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/filter.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "netns.h"
#include "ns_thread.h"

namespace knit {
namespace {

constexpr size_t kReadBuf = 64 << 10;
constexpr int kRcvBuf = 256 << 10;  // bounds what a flooding guest can queue in the kernel
constexpr size_t kMaxBatch = 256;
constexpr uint64_t kWakeKey = 0;

// The frames a responder answers (offsets on the Ethernet frame; an IPv4 header of any
// length; IPv6 without extension headers, as neither a Solicit nor an RS carries one).
const struct sock_filter kFilter[] = {
    BPF_STMT(BPF_LD | BPF_H | BPF_ABS, 12),                 // 0: ethertype
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ETH_P_IP, 0, 7),    // 1: IPv4 -> 2, else -> 9
    BPF_STMT(BPF_LD | BPF_B | BPF_ABS, 23),                 // 2: IPv4 protocol
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, IPPROTO_UDP, 0, 14),  // 3: UDP, else drop
    BPF_STMT(BPF_LD | BPF_H | BPF_ABS, 20),                 // 4: flags + fragment offset
    BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, 0x1fff, 12, 0),    // 5: a later fragment: drop
    BPF_STMT(BPF_LDX | BPF_B | BPF_MSH, 14),                // 6: X = IPv4 header length
    BPF_STMT(BPF_LD | BPF_H | BPF_IND, 16),                 // 7: UDP destination port
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 67, 8, 9),          // 8: DHCPv4 server port
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ETH_P_IPV6, 0, 8),  // 9: IPv6, else drop
    BPF_STMT(BPF_LD | BPF_B | BPF_ABS, 20),                 // 10: next header
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, IPPROTO_UDP, 0, 2),   // 11: UDP -> 12, else -> 14
    BPF_STMT(BPF_LD | BPF_H | BPF_ABS, 56),                 // 12: UDP destination port
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 547, 3, 4),         // 13: DHCPv6 server port
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, IPPROTO_ICMPV6, 0, 3),  // 14: ICMPv6, else drop
    BPF_STMT(BPF_LD | BPF_B | BPF_ABS, 54),                 // 15: ICMPv6 type
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 133, 0, 1),         // 16: router solicitation
    BPF_STMT(BPF_RET | BPF_K, 0x40000),                     // 17: accept, whole frame
    BPF_STMT(BPF_RET | BPF_K, 0),                           // 18: drop
};

// One frame off the socket, with whether its transport checksum is still to be completed:
// a guest's kernel leaves it to the NIC (virtio-net's VIRTIO_NET_HDR_F_NEEDS_CSUM, the tap
// makes it CHECKSUM_PARTIAL) and the field then holds only the pseudo-header's sum. packet(7):
// PACKET_AUXDATA, TP_STATUS_CSUMNOTREADY. Returns recvmsg's length (MSG_TRUNC: the whole frame's).
ssize_t RecvFrame(int fd, std::vector<uint8_t>& buf, bool* partialChecksum) {
  struct iovec iov = {buf.data(), buf.size()};
  alignas(struct cmsghdr) char control[CMSG_SPACE(sizeof(struct tpacket_auxdata))];
  struct msghdr msg = {};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  ssize_t len = recvmsg(fd, &msg, MSG_DONTWAIT | MSG_TRUNC);
  *partialChecksum = false;
  if (len < 0) return len;
  for (struct cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_PACKET || c->cmsg_type != PACKET_AUXDATA || c->cmsg_len < CMSG_LEN(sizeof(struct tpacket_auxdata))) continue;
    struct tpacket_auxdata aux;
    memcpy(&aux, CMSG_DATA(c), sizeof(aux));
    *partialChecksum = (aux.tp_status & TP_STATUS_CSUMNOTREADY) != 0;
  }
  return len;
}

int64_t NowNs() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

int Fail(OpError* err, int errnum, std::string context) {
  err->err = errnum;
  err->context = std::move(context);
  return -errnum;
}

// Protocol 0 at socket(): the socket receives nothing until bind, which comes after the filter.
int OpenBound(const std::string& ifname, int* ifindex) {
  int fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return -errno;
  auto fail = [fd] {
    int e = errno;
    close(fd);
    return -e;
  };
  unsigned index = if_nametoindex(ifname.c_str());
  if (index == 0) return fail();
  struct sock_fprog prog = {static_cast<unsigned short>(sizeof(kFilter) / sizeof(kFilter[0])),
                            const_cast<struct sock_filter*>(kFilter)};
  if (setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof(prog)) < 0) return fail();
  int one = 1;
  if (setsockopt(fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof(one)) < 0) return fail();
  // Each frame's tpacket_auxdata: whether its checksum is still the sender's to complete.
  if (setsockopt(fd, SOL_PACKET, PACKET_AUXDATA, &one, sizeof(one)) < 0) return fail();
  int size = kRcvBuf;
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof(size));
  struct sockaddr_ll sll = {};
  sll.sll_family = AF_PACKET;
  sll.sll_protocol = htons(ETH_P_ALL);
  sll.sll_ifindex = static_cast<int>(index);
  if (bind(fd, reinterpret_cast<struct sockaddr*>(&sll), sizeof(sll)) < 0) return fail();
  *ifindex = static_cast<int>(index);
  return fd;
}

}  // namespace

int PacketTaps::Create(Sink sink, std::unique_ptr<PacketTaps>* out, OpError* err) {
  int epfd = epoll_create1(EPOLL_CLOEXEC);
  if (epfd < 0) return Fail(err, errno, "epoll for packet taps");
  int wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  struct epoll_event ev = {};
  ev.events = EPOLLIN;
  ev.data.u64 = kWakeKey;
  if (wake < 0 || epoll_ctl(epfd, EPOLL_CTL_ADD, wake, &ev) < 0) {
    int e = errno;
    if (wake >= 0) close(wake);
    close(epfd);
    return Fail(err, e, "eventfd for packet taps");
  }
  out->reset(new PacketTaps(epfd, wake, std::move(sink)));
  (*out)->reader_ = std::thread([p = out->get()] { p->Run(); });
  return 0;
}

PacketTaps::~PacketTaps() { Stop(); }

int PacketTaps::Open(const std::string& nsPath, const std::string& ifname, int* id, int* ifindex, OpError* err) {
  int nsfd = OpenNetns(nsPath, err);
  if (nsfd < 0) return nsfd;
  int fd = RunInNetns(nsfd, [&] { return OpenBound(ifname, ifindex); });
  close(nsfd);
  if (fd < 0) return Fail(err, -fd, "open packet socket on " + ifname + " in " + nsPath);
  std::lock_guard<std::mutex> lock(mu_);
  int n = nextId_++;
  struct epoll_event ev = {};
  ev.events = EPOLLIN;
  ev.data.u64 = static_cast<uint64_t>(n);
  if (epoll_ctl(epfd_, EPOLL_CTL_ADD, fd, &ev) < 0) {
    int e = errno;
    close(fd);
    return Fail(err, e, "watch packet socket on " + ifname);
  }
  Sock sock{fd};
  sock.refilledNs = NowNs();
  socks_.emplace(n, sock);
  *id = n;
  return 0;
}

int PacketTaps::Send(int id, const uint8_t* data, size_t len, OpError* err) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = socks_.find(id);
  if (it == socks_.end()) return Fail(err, EBADF, "send on closed packet socket " + std::to_string(id));
  ssize_t n = send(it->second.fd, data, len, MSG_DONTWAIT);
  if (n < 0) return Fail(err, errno, "send frame on packet socket " + std::to_string(id));
  return 0;
}

void PacketTaps::Close(int id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = socks_.find(id);
  if (it == socks_.end()) return;
  epoll_ctl(epfd_, EPOLL_CTL_DEL, it->second.fd, nullptr);
  close(it->second.fd);
  socks_.erase(it);
}

void PacketTaps::Stop() {
  if (stopping_.exchange(true)) return;
  uint64_t one = 1;
  ssize_t w = write(wake_, &one, sizeof(one));
  (void)w;
  if (reader_.joinable()) reader_.join();
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [id, sock] : socks_) close(sock.fd);
  socks_.clear();
  close(wake_);
  close(epfd_);
}

void PacketTaps::Run() {
  std::vector<uint8_t> buf(kReadBuf);
  struct epoll_event events[32];
  while (!stopping_) {
    int n = epoll_wait(epfd_, events, 32, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      return;
    }
    std::vector<PacketEvent> batch;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (int i = 0; i < n && !stopping_; i++) {
        if (events[i].data.u64 == kWakeKey) continue;
        int id = static_cast<int>(events[i].data.u64);
        auto it = socks_.find(id);
        if (it == socks_.end()) continue;  // closed after epoll_wait returned
        Sock& sock = it->second;
        int64_t now = NowNs();
        sock.tokens = std::min(kFrameBurst, sock.tokens + (now - sock.refilledNs) / 1e9 * kFramesPerSecond);
        sock.refilledNs = now;
        for (size_t k = 0; k < kMaxBatch; k++) {
          bool partialChecksum = false;
          ssize_t len = RecvFrame(sock.fd, buf, &partialChecksum);
          if (len < 0) {
            if (errno == EINTR) continue;
            if (errno != EAGAIN) {
              PacketEvent e;
              e.id = id;
              e.err = errno;  // reported once; the kernel clears it on read
              batch.push_back(std::move(e));
            }
            break;
          }
          if (sock.tokens < 1) {
            sock.discarded++;
            continue;
          }
          sock.tokens -= 1;
          PacketEvent e;
          e.id = id;
          e.wireLength = static_cast<size_t>(len);
          e.partialChecksum = partialChecksum;
          size_t kept = std::min(static_cast<size_t>(len), buf.size());
          e.frame.assign(buf.begin(), buf.begin() + kept);
          batch.push_back(std::move(e));
        }
        // Said once per wake-up with discards, so a flood costs JS one event, not one per frame.
        if (sock.discarded) {
          PacketEvent e;
          e.id = id;
          e.overBudget = sock.discarded;
          sock.discarded = 0;
          batch.push_back(std::move(e));
        }
      }
    }
    if (!batch.empty() && !stopping_) sink_(std::move(batch));
  }
}

}  // namespace knit
