#include "fdpass.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>

namespace knit {
namespace {

using Clock = std::chrono::steady_clock;

int Fail(OpError* err, int errnum, std::string context) {
  err->err = errnum;
  err->context = std::move(context);
  return -errnum;
}

int RemainingMs(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left > 0 ? static_cast<int>(left) : 0;
}

// Waits until sock is ready for events or the deadline passes. 0, -ETIMEDOUT or -errno.
int WaitReady(int sock, short events, Clock::time_point deadline) {
  for (;;) {
    struct pollfd p = {sock, events, 0};
    int n = poll(&p, 1, RemainingMs(deadline));
    if (n > 0) return 0;
    if (n == 0) return -ETIMEDOUT;
    if (errno != EINTR) return -errno;
  }
}

void CloseAll(std::vector<int>* fds) {
  for (int fd : *fds) close(fd);
  fds->clear();
}

}  // namespace

long SendFdsOnce(int sock, const char* data, size_t len, const std::vector<int>& fds) {
  if (fds.size() > kMaxPassFds) return -EINVAL;
  if (!fds.empty() && len == 0) return -EINVAL;
  struct iovec iov = {const_cast<char*>(data), len};
  struct msghdr msg = {};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  std::vector<char> control;
  if (!fds.empty()) {
    size_t bytes = fds.size() * sizeof(int);
    control.assign(CMSG_SPACE(bytes), 0);
    msg.msg_control = control.data();
    msg.msg_controllen = control.size();
    struct cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
    cmsg->cmsg_level = SOL_SOCKET;
    cmsg->cmsg_type = SCM_RIGHTS;
    cmsg->cmsg_len = CMSG_LEN(bytes);
    std::memcpy(CMSG_DATA(cmsg), fds.data(), bytes);
  }
  for (;;) {
    ssize_t n = sendmsg(sock, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n >= 0) return n;
    if (errno != EINTR) return -errno;
  }
}

int SendFdsAll(int sock, const std::string& data, const std::vector<int>& fds, int timeoutMs, OpError* err) {
  auto deadline = Clock::now() + std::chrono::milliseconds(timeoutMs);
  size_t off = 0;
  bool fdsSent = fds.empty();
  while (off < data.size()) {
    long n = SendFdsOnce(sock, data.data() + off, data.size() - off, fdsSent ? std::vector<int>() : fds);
    if (n == -EAGAIN) {
      int rc = WaitReady(sock, POLLOUT, deadline);
      if (rc < 0) return Fail(err, -rc, "send fds: waiting for room in the socket buffer");
      continue;
    }
    if (n < 0) return Fail(err, static_cast<int>(-n), "send fds");
    off += static_cast<size_t>(n);
    fdsSent = true;
  }
  return 0;
}

int RecvFdsOnce(int sock, size_t maxBytes, size_t maxFds, std::string* data, std::vector<int>* fds, bool wait) {
  data->assign(maxBytes, '\0');
  struct iovec iov = {data->data(), maxBytes};
  struct msghdr msg = {};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  // The kernel fits (controllen - header) / sizeof(int) fds, so controllen must be CMSG_LEN
  // (not the padded CMSG_SPACE) for "more than maxFds" to show up as MSG_CTRUNC.
  std::vector<char> control(CMSG_SPACE(maxFds * sizeof(int)));
  msg.msg_control = maxFds ? control.data() : nullptr;
  msg.msg_controllen = maxFds ? CMSG_LEN(maxFds * sizeof(int)) : 0;
  int flags = MSG_CMSG_CLOEXEC | (wait ? 0 : MSG_DONTWAIT);
  ssize_t n;
  do {
    n = recvmsg(sock, &msg, flags);
  } while (n < 0 && errno == EINTR);
  if (n < 0) {
    data->clear();
    return -errno;
  }
  data->resize(static_cast<size_t>(n));
  size_t before = fds->size();
  for (struct cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    const unsigned char* p = CMSG_DATA(c);
    for (size_t i = 0; i < count; i++) {
      int fd;
      std::memcpy(&fd, p + i * sizeof(int), sizeof(int));
      fds->push_back(fd);
    }
  }
  if (msg.msg_flags & MSG_CTRUNC) {
    for (size_t i = before; i < fds->size(); i++) close((*fds)[i]);
    fds->resize(before);
    return -EMSGSIZE;
  }
  return 0;
}

int RequestFds(const std::string& socketPath, const std::string& request, int timeoutMs, size_t maxBytes,
               size_t maxFds, std::string* data, std::vector<int>* fds, OpError* err) {
  auto deadline = Clock::now() + std::chrono::milliseconds(timeoutMs);
  struct sockaddr_un addr = {};
  addr.sun_family = AF_UNIX;
  if (socketPath.empty() || socketPath.size() >= sizeof(addr.sun_path)) {
    return Fail(err, ENAMETOOLONG, "request fds: socket path must be 1-107 bytes: " + socketPath);
  }
  std::memcpy(addr.sun_path, socketPath.data(), socketPath.size());

  int sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (sock < 0) return Fail(err, errno, "request fds: socket");
  // A unix connect blocks only while the listener's backlog is full; SO_SNDTIMEO bounds that
  // wait. Everything after runs non-blocking with poll() against the one deadline.
  struct timeval tv = {timeoutMs / 1000, (timeoutMs % 1000) * 1000};
  setsockopt(sock, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  int rc = 0;
  if (connect(sock, reinterpret_cast<struct sockaddr*>(&addr), sizeof(addr)) < 0) {
    int e = (errno == EAGAIN || errno == EINPROGRESS) ? ETIMEDOUT : errno;
    rc = Fail(err, e, "request fds: connect to " + socketPath);
  }
  if (rc == 0) {
    int remaining = RemainingMs(deadline);
    rc = SendFdsAll(sock, request, {}, remaining, err);
    if (rc < 0) err->context = "request fds: send request to " + socketPath;
  }
  data->clear();
  while (rc == 0) {
    std::string chunk;
    int r = RecvFdsOnce(sock, 65536, maxFds - std::min(maxFds, fds->size()), &chunk, fds);
    if (r == -EAGAIN) {
      r = WaitReady(sock, POLLIN, deadline);
      if (r < 0) rc = Fail(err, -r, "request fds: waiting for the reply from " + socketPath);
      continue;
    }
    if (r < 0) {
      rc = Fail(err, -r, r == -EMSGSIZE ? "request fds: reply from " + socketPath + " carried more than " +
                                              std::to_string(maxFds) + " fds"
                                        : "request fds: read reply from " + socketPath);
      break;
    }
    if (chunk.empty()) break;  // server closed: the reply is complete
    if (data->size() + chunk.size() > maxBytes) {
      rc = Fail(err, EMSGSIZE, "request fds: reply from " + socketPath + " exceeds " + std::to_string(maxBytes) + " bytes");
      break;
    }
    data->append(chunk);
  }
  close(sock);
  if (rc < 0) {
    CloseAll(fds);
    data->clear();
  }
  return rc;
}

}  // namespace knit
