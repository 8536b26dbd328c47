#include "nl/socket.h"

#include <errno.h>
#include <linux/netlink.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include "nl/message.h"
#include "ns_thread.h"

#ifndef NETLINK_GET_STRICT_CHK
#define NETLINK_GET_STRICT_CHK 12
#endif

namespace knit::nl {

int Socket::Open(int nsfd) {
  Close();
  int fd = -1;
  int rc = RunInNetns(nsfd, [&fd] {
    fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
    return fd < 0 ? -errno : 0;
  });
  if (rc < 0) return rc;
  int one = 1;
  // Extended acks carry the kernel's reason text; capped acks skip echoing our request back;
  // strict checking makes dumps honour the filters in the request header (ifindex, table).
  setsockopt(fd, SOL_NETLINK, NETLINK_EXT_ACK, &one, sizeof one);
  setsockopt(fd, SOL_NETLINK, NETLINK_CAP_ACK, &one, sizeof one);
  setsockopt(fd, SOL_NETLINK, NETLINK_GET_STRICT_CHK, &one, sizeof one);
  sockaddr_nl local{};
  local.nl_family = AF_NETLINK;
  if (bind(fd, reinterpret_cast<sockaddr*>(&local), sizeof local) < 0) {
    int e = errno;
    close(fd);
    return -e;
  }
  fd_ = fd;
  return 0;
}

void Socket::Close() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

// Reads one datagram into rx_, sized by peeking first so large dump parts never truncate.
int Socket::Receive() {
  for (;;) {
    ssize_t want = recv(fd_, nullptr, 0, MSG_PEEK | MSG_TRUNC);
    if (want < 0) {
      if (errno == EINTR) continue;
      return -errno;
    }
    if (rx_.size() < static_cast<size_t>(want)) rx_.resize(want);
    ssize_t n = recv(fd_, rx_.data(), rx_.size(), 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return -errno;
    }
    rx_len_ = static_cast<size_t>(n);
    return 0;
  }
}

namespace {

std::string ExtackMessage(const nlmsghdr* h) {
  if (!(h->nlmsg_flags & NLM_F_ACK_TLVS)) return "";
  const auto* err = static_cast<const nlmsgerr*>(NLMSG_DATA(h));
  size_t offset = NLMSG_HDRLEN + sizeof(nlmsgerr);
  if (!(h->nlmsg_flags & NLM_F_CAPPED)) offset += NLMSG_ALIGN(err->msg.nlmsg_len) - NLMSG_HDRLEN;
  if (h->nlmsg_len <= offset) return "";
  Attr msg;
  const uint8_t* base = reinterpret_cast<const uint8_t*>(h);
  if (!FindAttr(base + offset, h->nlmsg_len - offset, NLMSGERR_ATTR_MSG, &msg)) return "";
  return msg.Str();
}

}  // namespace

int Socket::TransactOnce(Message& req, std::vector<Message>* replies, std::string* extack, bool* interrupted) {
  auto* hdr = reinterpret_cast<nlmsghdr*>(req.data());
  hdr->nlmsg_seq = ++seq_;
  hdr->nlmsg_pid = 0;
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  for (;;) {
    ssize_t n = sendto(fd_, req.data(), req.size(), 0, reinterpret_cast<sockaddr*>(&kernel), sizeof kernel);
    if (n >= 0) break;
    if (errno != EINTR) return -errno;
  }
  for (;;) {
    int rc = Receive();
    if (rc < 0) return rc;
    size_t left = rx_len_;
    for (auto* h = reinterpret_cast<nlmsghdr*>(rx_.data()); NLMSG_OK(h, left); h = NLMSG_NEXT(h, left)) {
      if (h->nlmsg_seq != seq_) continue;  // a late answer to an earlier request
      if (h->nlmsg_flags & NLM_F_DUMP_INTR) *interrupted = true;
      if (h->nlmsg_type == NLMSG_ERROR) {
        const auto* err = static_cast<const nlmsgerr*>(NLMSG_DATA(h));
        if (err->error == 0) return 0;
        *extack = ExtackMessage(h);
        return err->error;
      }
      if (h->nlmsg_type == NLMSG_DONE) {
        int status = 0;
        if (h->nlmsg_len >= NLMSG_HDRLEN + sizeof(int)) std::memcpy(&status, NLMSG_DATA(h), sizeof status);
        if (status < 0) *extack = ExtackMessage(h);
        return status < 0 ? status : 0;
      }
      if (replies) {
        const uint8_t* p = reinterpret_cast<const uint8_t*>(h);
        replies->emplace_back(p, p + h->nlmsg_len);
      }
    }
  }
}

int Socket::Transact(Message req, std::vector<Message>* replies, std::string* extack) {
  if (fd_ < 0) return -EBADF;
  const size_t first = replies ? replies->size() : 0;
  for (int attempt = 0;; attempt++) {
    bool interrupted = false;
    int rc = TransactOnce(req, replies, extack, &interrupted);
    if (rc < 0 || !interrupted || attempt == 4) return rc;
    if (replies) replies->resize(first);  // the dump changed under us: take it again
  }
}

}  // namespace knit::nl
