#include "tun.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/if_tun.h>
#include <net/if.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "ns_thread.h"

namespace knit {

namespace {

// Opens one queue of spec.name; exclusive: fail rather than attach to an existing device.
int AttachQueue(const TunSpec& spec, bool exclusive, int* out) {
  int fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC);
  if (fd < 0) return -errno;
  ifreq ifr{};
  strncpy(ifr.ifr_name, spec.name.c_str(), IFNAMSIZ - 1);
  ifr.ifr_flags = (spec.tap ? IFF_TAP : IFF_TUN) | IFF_NO_PI;
  if (spec.vnetHdr) ifr.ifr_flags |= IFF_VNET_HDR;
  if (spec.queues > 1) ifr.ifr_flags |= IFF_MULTI_QUEUE;
  // The first queue of a new device must create it, never attach to a persistent one.
  if (exclusive) ifr.ifr_flags |= IFF_TUN_EXCL;
  if (ioctl(fd, TUNSETIFF, &ifr) < 0) {
    int e = errno;
    close(fd);
    return -(exclusive && e == EBUSY ? EEXIST : e);
  }
  *out = fd;
  return 0;
}

// Runs inside the target netns: the tun file (and so the device) binds to the opener's netns.
int CreateHere(const TunSpec& spec, std::vector<int>* fds, int* ifindex) {
  if (if_nametoindex(spec.name.c_str()) != 0) return -EEXIST;
  std::vector<int> opened;
  auto fail = [&](int rc) {
    // Closing every queue of a non-persistent device removes it: nothing is left behind.
    if (!opened.empty()) ioctl(opened[0], TUNSETPERSIST, 0);
    for (int fd : opened) close(fd);
    return rc;
  };
  for (int q = 0; q < spec.queues; q++) {
    int fd;
    int rc = AttachQueue(spec, q == 0, &fd);
    if (rc < 0) return fail(rc);
    opened.push_back(fd);
  }
  if (spec.owner >= 0 && ioctl(opened[0], TUNSETOWNER, static_cast<unsigned long>(spec.owner)) < 0) return fail(-errno);
  if (spec.group >= 0 && ioctl(opened[0], TUNSETGROUP, static_cast<unsigned long>(spec.group)) < 0) return fail(-errno);
  int index = static_cast<int>(if_nametoindex(spec.name.c_str()));
  if (index == 0) return fail(-errno);
  if (spec.persist && ioctl(opened[0], TUNSETPERSIST, 1) < 0) return fail(-errno);
  *ifindex = index;
  if (spec.returnFds) {
    fds->insert(fds->end(), opened.begin(), opened.end());
  } else {
    for (int fd : opened) close(fd);
  }
  return 0;
}

int OpenHere(const TunSpec& spec, std::vector<int>* fds, int* ifindex) {
  int index = static_cast<int>(if_nametoindex(spec.name.c_str()));
  if (index == 0) return -ENODEV;
  std::vector<int> opened;
  for (int q = 0; q < spec.queues; q++) {
    int fd;
    int rc = AttachQueue(spec, false, &fd);
    if (rc < 0) {
      for (int o : opened) close(o);
      return rc;
    }
    opened.push_back(fd);
  }
  *ifindex = index;
  fds->insert(fds->end(), opened.begin(), opened.end());
  return 0;
}

}  // namespace

int TunOpen(int nsfd, const TunSpec& spec, std::vector<int>* fds, int* ifindex) {
  if (spec.name.empty() || spec.name.size() >= IFNAMSIZ || spec.queues < 1) return -EINVAL;
  return RunInNetns(nsfd, [&] { return OpenHere(spec, fds, ifindex); });
}

int TunCreate(int nsfd, const TunSpec& spec, std::vector<int>* fds, int* ifindex) {
  if (spec.name.empty() || spec.name.size() >= IFNAMSIZ || spec.queues < 1) return -EINVAL;
  return RunInNetns(nsfd, [&] { return CreateHere(spec, fds, ifindex); });
}

}  // namespace knit
