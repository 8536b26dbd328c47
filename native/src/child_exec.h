// Running a short-lived helper (a CNI plugin) from the daemon without fork(): posix_spawn
// (glibc: clone(CLONE_VM|CLONE_VFORK)) costs the same whatever the daemon's size, where
// Node's child_process.spawn forks the whole daemon on the event loop (milliseconds per
// exec at the daemon's RSS). Blocks until the child is reaped, so it runs on a thread of its own.
#pragma once
#include <string>
#include <vector>

namespace knit {

struct SpawnResult {
  int exitCode = -1;     // when it exited
  int termSignal = 0;    // when a signal ended it
  bool timedOut = false; // killed (with its process group) at the deadline
  std::string out;
  std::string err;
  int spawnErrno = 0;    // posix_spawn itself failed (ENOENT, EACCES, ...)
};

// Runs `path` with no arguments but argv[0], the environment `env` ("K=V"), `input` on its
// stdin; collects stdout and stderr. The child leads its own process group so the deadline
// kills what it started too.
SpawnResult SpawnAndWait(const std::string& path, const std::vector<std::string>& env, const std::string& input, int timeoutMs);

}  // namespace knit
