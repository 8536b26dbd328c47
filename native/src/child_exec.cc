#include "child_exec.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

namespace knit {
namespace {

long long NowMs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

void CloseAll(int (&fds)[3][2]) {
  for (auto& p : fds)
    for (int& fd : p)
      if (fd >= 0) close(fd), fd = -1;
}

// After the deadline's kill, how long a grandchild that escaped the group may hold the pipes.
constexpr int kDrainAfterKillMs = 1000;

}  // namespace

SpawnResult SpawnAndWait(const std::string& path, const std::vector<std::string>& env, const std::string& input, int timeoutMs) {
  SpawnResult r;
  int fds[3][2] = {{-1, -1}, {-1, -1}, {-1, -1}};  // stdin, stdout, stderr
  for (auto& p : fds) {
    if (pipe2(p, O_CLOEXEC) < 0) {
      r.spawnErrno = errno;
      CloseAll(fds);
      return r;
    }
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[0][0], 0);
  posix_spawn_file_actions_adddup2(&fa, fds[1][1], 1);
  posix_spawn_file_actions_adddup2(&fa, fds[2][1], 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // Pool threads block every signal and Node ignores SIGPIPE; the plugin gets neither.
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);

  std::vector<char*> envp;
  for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  char* argv[] = {const_cast<char*>(path.c_str()), nullptr};
  pid_t pid = -1;
  int rc = posix_spawn(&pid, path.c_str(), &fa, &attr, argv, envp.data());
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  close(fds[0][0]), fds[0][0] = -1;
  close(fds[1][1]), fds[1][1] = -1;
  close(fds[2][1]), fds[2][1] = -1;
  if (rc != 0) {
    r.spawnErrno = rc;
    CloseAll(fds);
    return r;
  }

  int in = fds[0][1];
  fcntl(in, F_SETFL, O_NONBLOCK);
  size_t written = 0;
  if (input.empty()) close(in), in = fds[0][1] = -1;
  long long deadline = NowMs() + timeoutMs;
  bool killed = false;
  char buf[16384];
  while (fds[1][0] >= 0 || fds[2][0] >= 0) {
    pollfd p[3];
    int n = 0;
    int outAt = -1, errAt = -1, inAt = -1;
    if (fds[1][0] >= 0) outAt = n, p[n++] = {fds[1][0], POLLIN, 0};
    if (fds[2][0] >= 0) errAt = n, p[n++] = {fds[2][0], POLLIN, 0};
    if (in >= 0) inAt = n, p[n++] = {in, POLLOUT, 0};
    long long left = deadline - NowMs();
    if (left <= 0) {
      if (killed) break;  // something outside the group still holds the pipes
      kill(-pid, SIGKILL);
      r.timedOut = killed = true;
      deadline = NowMs() + kDrainAfterKillMs;
      continue;
    }
    int ready = poll(p, n, static_cast<int>(left));
    if (ready < 0 && errno != EINTR) break;
    if (ready <= 0) continue;
    auto drain = [&](int at, int& fd, std::string& into) {
      if (at < 0 || !(p[at].revents & (POLLIN | POLLHUP | POLLERR))) return;
      ssize_t got = read(fd, buf, sizeof buf);
      if (got > 0) into.append(buf, got);
      else if (got == 0 || errno != EINTR) close(fd), fd = -1;
    };
    drain(outAt, fds[1][0], r.out);
    drain(errAt, fds[2][0], r.err);
    if (inAt >= 0 && (p[inAt].revents & (POLLOUT | POLLERR | POLLHUP))) {
      ssize_t put = write(in, input.data() + written, input.size() - written);
      if (put > 0) written += put;
      // EPIPE: the plugin exited without reading its config; its exit status says why
      if ((put < 0 && errno != EAGAIN && errno != EINTR) || written == input.size()) close(in), in = fds[0][1] = -1;
    }
  }
  CloseAll(fds);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) r.exitCode = WEXITSTATUS(status);
  else if (WIFSIGNALED(status)) r.termSignal = WTERMSIG(status);
  return r;
}

}  // namespace knit
