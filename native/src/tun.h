// tun/tap devices, made by opening /dev/net/tun inside the target netns (a tun file binds to
// the namespace of the thread that opens it).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace knit {

struct TunSpec {
  std::string name;
  bool tap = true;          // IFF_TAP, else IFF_TUN
  int queues = 1;           // >1: IFF_MULTI_QUEUE, one fd per queue
  int64_t owner = -1;       // TUNSETOWNER when >= 0
  int64_t group = -1;       // TUNSETGROUP when >= 0
  bool vnetHdr = false;     // IFF_VNET_HDR
  bool persist = true;      // TUNSETPERSIST
  bool returnFds = false;   // keep the queue fds open for the caller
};

// Creates the device in the netns open at nsfd (-1: caller's). On success returns 0, sets
// *ifindex and, when spec.returnFds, appends the queue fds to *fds (else closes them).
// On failure returns -errno and leaves no device behind.
int TunCreate(int nsfd, const TunSpec& spec, std::vector<int>* fds, int* ifindex);

// Opens spec.queues new queue fds on an existing tun/tap (the VM hand-off by fd): never
// creates one, and fails with EINVAL when the flags differ from the device's (the kernel's
// rule for attaching a queue). Appends the fds to *fds; on failure closes what it opened.
int TunOpen(int nsfd, const TunSpec& spec, std::vector<int>* fds, int* ifindex);

}  // namespace knit
