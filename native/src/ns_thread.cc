#include "ns_thread.h"

#include <errno.h>
#include <sched.h>

#include <thread>

namespace knit {

int RunInNetns(int nsfd, const std::function<int()>& fn) {
  int result = 0;
  std::thread worker([&] {
    if (nsfd >= 0 && setns(nsfd, CLONE_NEWNET) < 0) {
      result = -errno;
      return;
    }
    result = fn();
  });
  worker.join();
  return result;
}

}  // namespace knit
