#include "netlink_reader.h"

#include <unistd.h>

#include "netns.h"
#include "ns_thread.h"

namespace knit {

int OpenNetlinkIn(const std::string& nsPath, int protocol, int rcvbufBytes, const std::string& what, OpError* err) {
  int nsfd = -1;
  if (!nsPath.empty()) {
    nsfd = OpenNetns(nsPath, err);
    if (nsfd < 0) return nsfd;
  }
  int sock = -1;
  int rc = RunInNetns(nsfd, [&] {
    sock = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, protocol);
    return sock < 0 ? -errno : 0;
  });
  if (nsfd >= 0) close(nsfd);
  if (rc < 0) {
    err->err = -rc;
    err->context = "open " + what + " socket in " + NetnsName(nsPath);
    return rc;
  }
  // FORCE (CAP_NET_ADMIN) may exceed net.core.rmem_max; without the capability, ask politely.
  if (setsockopt(sock, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbufBytes, sizeof(rcvbufBytes)) < 0) {
    setsockopt(sock, SOL_SOCKET, SO_RCVBUF, &rcvbufBytes, sizeof(rcvbufBytes));
  }
  return sock;
}

}  // namespace knit
