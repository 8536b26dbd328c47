// Who is on the other end of a unix socket (SO_PEERCRED): the credentials the peer had when
// it called connect() (or socketpair()), checked by the kernel, not claimed by the peer.
#pragma once
#include <sys/types.h>

namespace knit {

struct PeerCred {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
};

// Returns 0 or -errno (-ENOTSOCK, -EBADF, ...).
int GetPeerCred(int sock, PeerCred* out);

}  // namespace knit
