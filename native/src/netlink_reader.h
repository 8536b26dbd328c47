// What the addon's netlink reader threads share (monitor.cc, nflog.cc): their socket, made in
// the netns it reports on, and the read loop that takes what it holds without blocking,
// datagram by datagram, into one batch of events, with the kernel's ENOBUFS (it dropped
// messages) as an overrun event that the socket survives.
#pragma once
#include <errno.h>
#include <linux/netlink.h>
#include <sys/socket.h>

#include <string>
#include <vector>

#include "errors.h"

namespace knit {

// A netlink socket of `protocol` made in the netns at nsPath (empty: the caller's), with a
// kernel receive buffer of rcvbufBytes. Returns the fd, or -errno with err naming `what`.
int OpenNetlinkIn(const std::string& nsPath, int protocol, int rcvbufBytes, const std::string& what, OpError* err);

// nsPath as a message names it.
inline std::string NetnsName(const std::string& nsPath) { return nsPath.empty() ? "the daemon's netns" : nsPath; }

// Event needs the enum values Event::kOverrun and Event::kError and the fields type and err.
// parse(data, length) appends the events of one datagram from the kernel (port 0; anything
// else is no event). Returns false when the socket failed for good (the batch ends with a
// kError event).
template <typename Event, typename Parse>
bool DrainNetlink(int sock, std::vector<char>* buf, size_t maxBatch, std::vector<Event>* batch, Parse parse) {
  while (batch->size() < maxBatch) {
    struct sockaddr_nl from = {};
    struct iovec iov = {buf->data(), buf->size()};
    struct msghdr msg = {};
    msg.msg_name = &from;
    msg.msg_namelen = sizeof(from);
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    ssize_t n = recvmsg(sock, &msg, MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) return true;
      Event e;
      if (errno == ENOBUFS) {
        e.type = Event::kOverrun;
        batch->push_back(std::move(e));
        continue;
      }
      e.type = Event::kError;
      e.err = errno;
      batch->push_back(std::move(e));
      return false;
    }
    if (from.nl_pid != 0) continue;
    if (msg.msg_flags & MSG_TRUNC) {
      Event e;
      e.type = Event::kOverrun;  // a message larger than the buffer: lost, like an overrun
      batch->push_back(std::move(e));
      continue;
    }
    parse(buf->data(), static_cast<size_t>(n));
  }
  return true;
}

}  // namespace knit
