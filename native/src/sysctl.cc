#include "sysctl.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include "ns_thread.h"

namespace knit {

namespace {

// "net.ipv4.ip_forward" → "/proc/sys/net/ipv4/ip_forward". Refuses anything that could step
// outside /proc/sys (empty parts, "..", slashes).
bool KeyToPath(const std::string& key, std::string* path) {
  if (key.empty() || key.size() > 255) return false;
  std::string out = "/proc/sys/";
  std::string part;
  for (size_t i = 0; i <= key.size(); i++) {
    char c = i < key.size() ? key[i] : '.';
    if (c == '.') {
      if (part.empty() || part == "..") return false;
      out += part + "/";
      part.clear();
    } else if (c == '/' || c == '\0') {
      return false;
    } else {
      part += c;
    }
  }
  out.pop_back();
  *path = out;
  return true;
}

}  // namespace

int SysctlWrite(int nsfd, const std::string& key, const std::string& value) {
  std::string path;
  if (!KeyToPath(key, &path)) return -EINVAL;
  // Opened inside the netns: /proc/sys/net resolves against the opener's namespace.
  return RunInNetns(nsfd, [&] {
    int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) return -errno;
    ssize_t n = write(fd, value.data(), value.size());
    int rc = n < 0 ? -errno : 0;
    close(fd);
    return rc;
  });
}

int SysctlRead(int nsfd, const std::string& key, std::string* value) {
  std::string path;
  if (!KeyToPath(key, &path)) return -EINVAL;
  return RunInNetns(nsfd, [&] {
    int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -errno;
    char buf[4096];
    std::string out;
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0) out.append(buf, n);
    int rc = n < 0 ? -errno : 0;
    close(fd);
    while (!out.empty() && out.back() == '\n') out.pop_back();
    *value = out;
    return rc;
  });
}

}  // namespace knit
