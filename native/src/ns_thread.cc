#include "ns_thread.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <condition_variable>
#include <deque>
#include <mutex>
#include <system_error>
#include <thread>

namespace knit {

namespace {

// Idle workers kept for the next call. Calls come from the JS thread and the libuv pool (4
// threads by default), so more than 4 at once is rare.
constexpr int kMaxIdle = 4;

struct Job {
  Job(int fd, const std::function<int()>* f) : nsfd(fd), fn(f) {}
  int nsfd;
  const std::function<int()>* fn;
  int result = 0;
  bool done = false;
};

class Workers {
 public:
  void SetHome(int fd) {
    std::lock_guard<std::mutex> lock(mu_);
    if (home_ < 0) home_ = fd;
    else close(fd);
  }

  int Run(int nsfd, const std::function<int()>& fn) {
    Job job(nsfd, &fn);
    std::unique_lock<std::mutex> lock(mu_);
    queue_.push_back(&job);
    // Workers already woken for earlier jobs count in idle_ until they take one.
    if (idle_ >= static_cast<int>(queue_.size())) {
      lock.unlock();
      ready_.notify_one();
      lock.lock();
    } else {
      try {
        std::thread(&Workers::Loop, this).detach();
      } catch (const std::system_error&) {
        queue_.pop_back();
        return -EAGAIN;
      }
    }
    done_.wait(lock, [&] { return job.done; });
    return job.result;
  }

 private:
  void Loop() {
    std::unique_lock<std::mutex> lock(mu_);
    idle_++;
    for (;;) {
      ready_.wait(lock, [&] { return !queue_.empty(); });
      idle_--;
      Job* job = queue_.front();
      queue_.pop_front();
      const int home = home_;
      lock.unlock();

      int result = setns(job->nsfd, CLONE_NEWNET) < 0 ? -errno : (*job->fn)();
      // Back home before anything else: see the header. Without a home fd we cannot go back.
      bool home_ok = home >= 0 && setns(home, CLONE_NEWNET) == 0;

      lock.lock();
      job->result = result;
      job->done = true;  // the caller may return (and drop job) from here on
      const bool stay = home_ok && idle_ < kMaxIdle;
      if (stay) idle_++;
      lock.unlock();
      done_.notify_all();  // done_ outlives every caller; a caller's own Job would not
      if (!stay) return;
      lock.lock();
    }
  }

  std::mutex mu_;
  std::condition_variable ready_;  // a job was queued
  std::condition_variable done_;   // some job finished
  std::deque<Job*> queue_;
  int idle_ = 0;  // workers home and free, or woken and about to take a job
  int home_ = -1;
};

// Never destroyed: detached workers may still wait on it while the process exits.
Workers& Pool() {
  static Workers* pool = new Workers;
  return *pool;
}

}  // namespace

void InitNetnsHome() {
  static std::once_flag once;
  std::call_once(once, [] {
    int fd = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) Pool().SetHome(fd);
  });
}

int RunInNetns(int nsfd, const std::function<int()>& fn) {
  if (nsfd < 0) return fn();
  return Pool().Run(nsfd, fn);
}

}  // namespace knit
