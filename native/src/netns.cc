// Opening and recognising network namespace files. Everything here is cheap (a few syscalls,
// no thread, no namespace switch), so callers use it synchronously.
#include "netns.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <linux/nsfs.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <string>

namespace knit {
namespace {

// linux/nsfs.h of Linux 6.18; defined here so the addon builds against older headers.
constexpr unsigned long kNsGetId = _IOR(0xb7, 13, __u64);

const char* FileKind(mode_t mode) {
  switch (mode & S_IFMT) {
    case S_IFREG: return "a regular file";
    case S_IFDIR: return "a directory";
    case S_IFLNK: return "a symbolic link";
    case S_IFIFO: return "a fifo";
    case S_IFSOCK: return "a socket";
    case S_IFCHR: return "a character device";
    case S_IFBLK: return "a block device";
    default: return "an unknown kind of file";
  }
}

const char* NamespaceKind(int nstype) {
  switch (nstype) {
    case CLONE_NEWNS: return "a mount namespace";
    case CLONE_NEWUTS: return "a uts namespace";
    case CLONE_NEWIPC: return "an ipc namespace";
    case CLONE_NEWUSER: return "a user namespace";
    case CLONE_NEWPID: return "a pid namespace";
    case CLONE_NEWCGROUP: return "a cgroup namespace";
    case CLONE_NEWTIME: return "a time namespace";
    default: return "a namespace of another type";
  }
}

int Fail(OpError* err, int errnum, std::string context) {
  if (err) {
    err->err = errnum;
    err->context = std::move(context);
  }
  return -errnum;
}

// Before NS_GET_NSTYPE (Linux 4.11) the only ways to tell are the filesystem magic and the
// "net:[inode]" name the kernel gives the file in /proc/self/fd.
bool IsNetnsByLink(int fd) {
  struct statfs fs;
  if (fstatfs(fd, &fs) < 0 || fs.f_type != NSFS_MAGIC) return false;
  char link[64];
  std::string proc = "/proc/self/fd/" + std::to_string(fd);
  ssize_t n = readlink(proc.c_str(), link, sizeof(link) - 1);
  if (n < 0) return false;
  link[n] = '\0';
  return std::string(link).rfind("net:[", 0) == 0;
}

}  // namespace

int OpenNetns(const std::string& path, OpError* err) {
  const std::string target = path.empty() ? "/proc/self/ns/net" : path;
  // stat first: opening a fifo would block and opening a device can have side effects.
  struct stat st;
  if (stat(target.c_str(), &st) < 0) return Fail(err, errno, "open netns " + target);
  if (!S_ISREG(st.st_mode)) {
    return Fail(err, EINVAL, target + " is not a network namespace (it is " + FileKind(st.st_mode) + ")");
  }
  int fd = open(target.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return Fail(err, errno, "open netns " + target);

  int nstype = ioctl(fd, NS_GET_NSTYPE);
  if (nstype == CLONE_NEWNET) return fd;
  int ioctlErr = errno;
  bool isNetns = nstype < 0 && ioctlErr == ENOTTY && IsNetnsByLink(fd);
  if (isNetns) return fd;

  std::string what;
  if (nstype >= 0) {
    what = NamespaceKind(nstype);
  } else {
    struct statfs fs;
    what = (fstatfs(fd, &fs) == 0 && fs.f_type == NSFS_MAGIC) ? "a namespace of another type"
                                                                : FileKind(st.st_mode);
  }
  close(fd);
  return Fail(err, EINVAL, target + " is not a network namespace (it is " + what + ")");
}

int IdentifyNetns(const std::string& path, NetnsId* id, OpError* err) {
  int fd = OpenNetns(path, err);
  if (fd < 0) return fd;
  int rc = IdentifyNetnsFd(fd, id, err, path);
  close(fd);
  return rc;
}

int IdentifyNetnsFd(int fd, NetnsId* id, OpError* err, const std::string& path) {
  struct stat st;
  if (fstat(fd, &st) < 0) return Fail(err, errno, "stat netns " + path);
  id->dev = st.st_dev;
  id->ino = st.st_ino;
  // Older kernels answer ENOTTY: the inode is all there is.
  uint64_t nsid = 0;
  if (ioctl(fd, kNsGetId, &nsid) == 0) id->nsid = nsid;
  return 0;
}

}  // namespace knit
