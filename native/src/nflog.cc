#include "nflog.h"

#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_log.h>
#include <linux/netlink.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cstring>

#include "netlink_reader.h"

namespace knit {
namespace {

constexpr int kRcvbuf = 1 << 20;
constexpr size_t kRecvBuf = 64 << 10;
constexpr size_t kMaxBatch = 256;
constexpr uint16_t kPacketMsg = (NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_PACKET;
constexpr uint16_t kConfigMsg = (NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_CONFIG;

int Fail(OpError* err, int errnum, std::string context) {
  err->err = errnum;
  err->context = std::move(context);
  return -errnum;
}

int64_t RealtimeNs() {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

uint32_t Be32(const char* p) {
  uint32_t v;
  memcpy(&v, p, 4);
  return ntohl(v);
}

uint64_t Be64(const char* p) {
  uint64_t v;
  memcpy(&v, p, 8);
  return be64toh(v);
}

// Walks the netlink attributes of one message's payload; fn(type, payload, payloadLen).
template <typename Fn>
void ForEachAttr(const char* p, size_t len, Fn fn) {
  while (len >= NLA_HDRLEN) {
    const auto* a = reinterpret_cast<const struct nlattr*>(p);
    if (a->nla_len < NLA_HDRLEN || a->nla_len > len) return;
    fn(a->nla_type & NLA_TYPE_MASK, p + NLA_HDRLEN, static_cast<size_t>(a->nla_len - NLA_HDRLEN));
    size_t step = NLA_ALIGN(a->nla_len);
    if (step >= len) return;
    p += step;
    len -= step;
  }
}

void ParsePacket(const struct nlmsghdr* h, int64_t receivedNs, std::vector<NflogEvent>* out) {
  if (h->nlmsg_len < NLMSG_LENGTH(sizeof(struct nfgenmsg))) return;
  const auto* g = static_cast<const struct nfgenmsg*>(NLMSG_DATA(h));
  NflogEvent e;
  e.family = g->nfgen_family;
  e.timeNs = receivedNs;
  const char* attrs = static_cast<const char*>(NLMSG_DATA(h)) + NLMSG_ALIGN(sizeof(struct nfgenmsg));
  size_t len = h->nlmsg_len - NLMSG_LENGTH(NLMSG_ALIGN(sizeof(struct nfgenmsg)));
  ForEachAttr(attrs, len, [&](int type, const char* p, size_t n) {
    switch (type) {
      case NFULA_PACKET_HDR:
        if (n >= sizeof(struct nfulnl_msg_packet_hdr)) e.hook = reinterpret_cast<const struct nfulnl_msg_packet_hdr*>(p)->hook;
        break;
      case NFULA_PREFIX: e.prefix.assign(p, strnlen(p, n)); break;
      case NFULA_IFINDEX_INDEV: if (n >= 4) e.indev = Be32(p); break;
      case NFULA_IFINDEX_OUTDEV: if (n >= 4) e.outdev = Be32(p); break;
      case NFULA_IFINDEX_PHYSINDEV: if (n >= 4) e.physindev = Be32(p); break;
      case NFULA_IFINDEX_PHYSOUTDEV: if (n >= 4) e.physoutdev = Be32(p); break;
      case NFULA_TIMESTAMP:
        if (n >= 16) {
          uint64_t sec = Be64(p), usec = Be64(p + 8);
          if (sec) e.timeNs = static_cast<int64_t>(sec) * 1000000000 + static_cast<int64_t>(usec) * 1000;
        }
        break;
      case NFULA_PAYLOAD: e.payload.assign(p, p + n); break;
      default: break;
    }
  });
  out->push_back(std::move(e));
}

// One NFULNL_MSG_CONFIG request to the kernel, acked: returns 0 or -errno.
int Configure(int sock, uint16_t group, const std::function<void(char*, size_t*)>& attrs) {
  alignas(struct nlmsghdr) char req[256] = {};
  auto* h = reinterpret_cast<struct nlmsghdr*>(req);
  h->nlmsg_type = kConfigMsg;
  h->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
  h->nlmsg_seq = 1;
  auto* g = static_cast<struct nfgenmsg*>(NLMSG_DATA(h));
  g->nfgen_family = AF_UNSPEC;
  g->version = NFNETLINK_V0;
  g->res_id = htons(group);
  size_t len = NLMSG_LENGTH(NLMSG_ALIGN(sizeof(struct nfgenmsg)));
  attrs(req, &len);
  h->nlmsg_len = static_cast<uint32_t>(len);
  struct sockaddr_nl kernel = {};
  kernel.nl_family = AF_NETLINK;
  if (sendto(sock, req, len, 0, reinterpret_cast<struct sockaddr*>(&kernel), sizeof(kernel)) < 0) return -errno;
  alignas(struct nlmsghdr) char buf[4096];
  for (;;) {
    ssize_t n = recv(sock, buf, sizeof(buf), 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return -errno;
    }
    int remaining = static_cast<int>(n);
    for (auto* r = reinterpret_cast<struct nlmsghdr*>(buf); NLMSG_OK(r, remaining); r = NLMSG_NEXT(r, remaining)) {
      if (r->nlmsg_type != NLMSG_ERROR || r->nlmsg_seq != 1) continue;  // a packet already: not ours to read here
      return static_cast<const struct nlmsgerr*>(NLMSG_DATA(r))->error;
    }
  }
}

void PutAttr(char* req, size_t* len, uint16_t type, const void* data, size_t n) {
  auto* a = reinterpret_cast<struct nlattr*>(req + *len);
  a->nla_type = type;
  a->nla_len = static_cast<uint16_t>(NLA_HDRLEN + n);
  memcpy(req + *len + NLA_HDRLEN, data, n);
  *len += NLA_ALIGN(a->nla_len);
}

}  // namespace

void ParseNflog(const char* buf, size_t len, int64_t receivedNs, std::vector<NflogEvent>* out) {
  int remaining = static_cast<int>(len);
  for (auto* h = reinterpret_cast<const struct nlmsghdr*>(buf); NLMSG_OK(h, remaining); h = NLMSG_NEXT(h, remaining)) {
    if (h->nlmsg_type == kPacketMsg) ParsePacket(h, receivedNs, out);
  }
}

int NflogReader::Open(const std::string& nsPath, uint16_t group, uint32_t copyRange, std::unique_ptr<NflogReader>* out,
                      OpError* err) {
  int sock = OpenNetlinkIn(nsPath, NETLINK_NETFILTER, kRcvbuf, "nfnetlink_log", err);
  if (sock < 0) return sock;
  std::string where = NetnsName(nsPath);
  // The config answers come back on this socket: a second's wait at most, then the socket
  // blocks no more (the reader polls).
  struct timeval tv = {1, 0};
  setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  std::string what = "nflog group " + std::to_string(group) + " in " + where;
  int rc = Configure(sock, group, [](char* req, size_t* len) {
    struct nfulnl_msg_config_cmd cmd = {NFULNL_CFG_CMD_BIND};
    PutAttr(req, len, NFULA_CFG_CMD, &cmd, sizeof(cmd));
  });
  if (rc == 0) {
    rc = Configure(sock, group, [copyRange](char* req, size_t* len) {
      struct nfulnl_msg_config_mode mode = {};
      mode.copy_range = htonl(copyRange);
      mode.copy_mode = NFULNL_COPY_PACKET;
      PutAttr(req, len, NFULA_CFG_MODE, &mode, sizeof(mode));
      uint32_t qthresh = htonl(1);  // each packet as it comes, not batched for up to a second
      PutAttr(req, len, NFULA_CFG_QTHRESH, &qthresh, sizeof(qthresh));
    });
  }
  if (rc < 0) {
    close(sock);
    return Fail(err, -rc, "bind " + what);
  }
  int wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake < 0) {
    int e = errno;
    close(sock);
    return Fail(err, e, "eventfd for " + what);
  }
  out->reset(new NflogReader(sock, wake));
  return 0;
}

NflogReader::~NflogReader() { Stop(); }

int NflogReader::Start(Sink sink) {
  sink_ = std::move(sink);
  reader_ = std::thread([this] { Run(); });
  return 0;
}

void NflogReader::Stop() {
  if (sock_ < 0) return;
  stopping_ = true;
  uint64_t one = 1;
  ssize_t n = write(wake_, &one, sizeof(one));
  (void)n;
  if (reader_.joinable()) reader_.join();
  close(sock_);
  close(wake_);
  sock_ = wake_ = -1;
}

void NflogReader::Run() {
  std::vector<char> buf(kRecvBuf);
  while (!stopping_) {
    struct pollfd fds[2] = {{wake_, POLLIN, 0}, {sock_, POLLIN, 0}};
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      NflogEvent e;
      e.type = NflogEvent::kError;
      e.err = errno;
      sink_({e});
      return;
    }
    if (fds[0].revents) return;
    if (!fds[1].revents) continue;
    std::vector<NflogEvent> batch;
    bool fatal = !DrainNetlink(sock_, &buf, kMaxBatch, &batch, [&](const char* data, size_t n) { ParseNflog(data, n, RealtimeNs(), &batch); });
    if (!batch.empty()) sink_(std::move(batch));
    if (fatal) return;
  }
}

}  // namespace knit
