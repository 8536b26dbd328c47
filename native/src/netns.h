// Network namespace files: open, identify, create (pinned by a bind mount), delete.
#pragma once
#include <stdint.h>
#include <sys/types.h>

#include <string>

#include "errors.h"

namespace knit {

struct NetnsId {
  dev_t dev = 0;
  ino_t ino = 0;
  // The kernel's namespace id (ioctl NS_GET_ID, Linux 6.18+): unlike the inode, never reused
  // once the namespace is gone. 0 when the kernel has none.
  uint64_t nsid = 0;
};

// Opens path O_RDONLY|O_CLOEXEC and checks it is a network namespace (NS_GET_NSTYPE, with an
// nsfs statfs fallback). Returns the fd, or -errno with err->context saying why
// ("/tmp/x is not a network namespace"). Empty path = the caller's own netns (/proc/self/ns/net).
int OpenNetns(const std::string& path, OpError* err);

// The (st_dev, st_ino) pair that names a namespace: equal pairs = the same namespace.
// Returns 0 or -errno (err filled as for OpenNetns).
int IdentifyNetns(const std::string& path, NetnsId* id, OpError* err);
int IdentifyNetnsFd(int fd, NetnsId* id, OpError* err, const std::string& path);

// Creates a new netns pinned by a bind mount on path (which must not exist); the parent
// directory is created if missing and made a shared mount, as iproute2 does for /run/netns.
// Blocks for about a millisecond (runs a thread). On failure leaves no file behind.
int CreatePinnedNetns(const std::string& path, NetnsId* id, OpError* err);

// Unmounts (MNT_DETACH) and unlinks a pinned netns file. A missing path is success when
// ignoreMissing. Refuses paths that are neither a netns nor a leftover empty file.
int DeletePinnedNetns(const std::string& path, bool ignoreMissing, OpError* err);

}  // namespace knit
