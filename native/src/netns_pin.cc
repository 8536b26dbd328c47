// Creating and deleting pinned network namespaces: a netns lives as long as something refers
// to it, and a bind mount of its nsfs file onto an ordinary (empty) file is the reference
// that outlives every process, like `ip netns add`.
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>
#include <thread>

#include "netns.h"

namespace knit {
namespace {

int Fail(OpError* err, int errnum, std::string context) {
  err->err = errnum;
  err->context = std::move(context);
  return -errnum;
}

// mkdir -p with 0755, like iproute2's run dir.
int MakeDirs(const std::string& dir) {
  if (mkdir(dir.c_str(), 0755) == 0 || errno == EEXIST) return 0;
  if (errno != ENOENT) return -errno;
  size_t slash = dir.find_last_of('/');
  if (slash == 0 || slash == std::string::npos) return -ENOENT;
  int rc = MakeDirs(dir.substr(0, slash));
  if (rc < 0) return rc;
  return (mkdir(dir.c_str(), 0755) == 0 || errno == EEXIST) ? 0 : -errno;
}

// Makes dir a mount point with shared propagation, so a pin mounted under it shows up in
// (and is unmounted from) every mount namespace that shares it, e.g. a runtime's. This is
// iproute2's sequence: try --make-rshared; the kernel answers EINVAL when dir is not a
// mount point yet, so bind it onto itself once and try again. The flock on the directory
// serialises concurrent creators (in this process or others): racing binds stack up
// mounts without bound (Debian bug 949235).
int MakeSharedMountPoint(const std::string& dir, OpError* err) {
  int lock = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (lock < 0) return Fail(err, errno, "open netns run dir " + dir);
  flock(lock, LOCK_EX);  // best effort, as in iproute2: proceed even if locking fails
  int rc = 0;
  bool bound = false;
  while (mount("", dir.c_str(), "none", MS_SHARED | MS_REC, nullptr) < 0) {
    if (errno != EINVAL || bound) {
      rc = Fail(err, errno, "make netns run dir " + dir + " a shared mount");
      break;
    }
    if (mount(dir.c_str(), dir.c_str(), "none", MS_BIND | MS_REC, nullptr) < 0) {
      rc = Fail(err, errno, "bind netns run dir " + dir + " onto itself");
      break;
    }
    bound = true;
  }
  flock(lock, LOCK_UN);
  close(lock);
  return rc;
}

// unshare(CLONE_NEWNET) moves only the calling thread into the new netns; a throwaway thread
// does it so no JS or libuv thread ever changes namespace. The bind mount uses
// /proc/thread-self (not /proc/self, which is the main thread's netns).
int PinNewNetns(const std::string& path, OpError* err) {
  int rc = 0;
  std::thread worker([&] {
    if (unshare(CLONE_NEWNET) < 0) {
      rc = Fail(err, errno, "unshare(CLONE_NEWNET) for " + path);
      return;
    }
    if (mount("/proc/thread-self/ns/net", path.c_str(), "none", MS_BIND, nullptr) < 0) {
      rc = Fail(err, errno, "bind-mount new netns onto " + path);
    }
  });
  worker.join();
  return rc;
}

bool ValidPinPath(const std::string& path) {
  if (path.size() < 2 || path[0] != '/' || path.back() == '/') return false;
  std::string base = path.substr(path.find_last_of('/') + 1);
  return base != "." && base != "..";
}

}  // namespace

int CreatePinnedNetns(const std::string& path, NetnsId* id, OpError* err) {
  if (!ValidPinPath(path)) {
    return Fail(err, EINVAL, "create netns: path '" + path + "' must be absolute and name a file");
  }
  std::string dir = path.substr(0, path.find_last_of('/'));
  // The run dir is made a shared mount: never do that to the root filesystem.
  if (dir.empty()) return Fail(err, EINVAL, "create netns: " + path + " must be inside a run directory, not directly in /");
  int rc = MakeDirs(dir);
  if (rc < 0) return Fail(err, -rc, "create netns run dir " + dir);
  rc = MakeSharedMountPoint(dir, err);
  if (rc < 0) return rc;

  int fd = open(path.c_str(), O_RDONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0);
  if (fd < 0) return Fail(err, errno, "create netns file " + path);
  close(fd);

  rc = PinNewNetns(path, err);
  if (rc == 0) rc = IdentifyNetns(path, id, err);
  if (rc < 0) {
    umount2(path.c_str(), MNT_DETACH);  // EINVAL if the mount never happened: harmless
    unlink(path.c_str());
  }
  return rc;
}

int DeletePinnedNetns(const std::string& path, bool ignoreMissing, OpError* err) {
  struct stat st;
  if (lstat(path.c_str(), &st) < 0) {
    if (errno == ENOENT && ignoreMissing) return 0;
    return Fail(err, errno, "delete netns " + path);
  }
  // Only a netns is unmounted: umount2 on an arbitrary path could detach anything.
  int fd = OpenNetns(path, err);
  if (fd < 0) return fd;
  close(fd);
  if (umount2(path.c_str(), MNT_DETACH | UMOUNT_NOFOLLOW) < 0 && errno != EINVAL) {
    return Fail(err, errno, "unmount netns " + path);
  }
  if (unlink(path.c_str()) < 0) return Fail(err, errno, "remove netns file " + path);
  return 0;
}

}  // namespace knit
