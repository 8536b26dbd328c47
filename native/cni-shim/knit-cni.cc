// knit-cni: the CNI plugin a container runtime execs (CNI spec, "Plugin execution"). It
// forwards one call to the knit daemon over a unix socket and prints the daemon's answer.
// It is exec'd once per pod per verb, so it stays small, static and free of JSON parsing
// beyond the two keys it needs before the daemon is reached ("socket", "cniVersion").
//
// Protocol (docs/cni-frontend.md), version 1, one exchange per connection:
//   shim -> daemon: one JSON object {"v":1,"command","containerId","netns","ifname","args",
//                   "path","config"}, then shutdown(SHUT_WR)
//   daemon -> shim: "knit-cni/1 <exit code>\n" followed by the bytes for stdout
// Daemon not listening yet (no socket, or a stale one): ADD/CHECK/GC wait for it up to
// "daemonWaitSeconds" (default 10), so pods whose ADDs come while a node's knit starts get
// their network once it serves rather than after the runtime's retry back-off. Still
// unreachable then: CNI code 11 (try again later). STATUS answers at once, 50 (plugin not
// available, the code CNI 1.1 gives STATUS for "not ready"); DEL is written to the durable
// delete queue (conflist "deleteQueue") that the daemon drains at start-up, and succeeds.
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <poll.h>
#include <string>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

namespace {

// install-cni recognises its own copy of the shim by this string (never clobbers another file).
extern "C" const char kKnitShimMarker[] __attribute__((used)) = "knit-cni-shim-marker/1";

const char *kDefaultSocket = "/run/knit/cni.sock";
const char *kDefaultDeleteQueue = "/var/lib/knit/cni-delete-queue";
const int kDefaultTimeoutSeconds = 60;
const int kDefaultDaemonWaitSeconds = 10;
// Between connects while the daemon starts: a failed connect costs a few microseconds.
const int kConnectRetryMs = 25;
const char *kSupportedVersions = "[\"0.3.0\",\"0.3.1\",\"0.4.0\",\"1.0.0\",\"1.1.0\"]";

std::string readAll(int fd) {
  std::string out;
  char buf[65536];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n > 0) out.append(buf, size_t(n));
    else if (n == 0) break;
    else if (errno != EINTR) break;
  }
  return out;
}

bool writeAll(int fd, const std::string &s) {
  size_t off = 0;
  while (off < s.size()) {
    ssize_t n = write(fd, s.data() + off, s.size() - off);
    if (n > 0) off += size_t(n);
    else if (n < 0 && errno == EINTR) continue;
    else return false;
  }
  return true;
}

std::string jsonString(const std::string &s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char esc[8];
          snprintf(esc, sizeof esc, "\\u%04x", c);
          out += esc;
        } else {
          out += char(c);
        }
    }
  }
  return out + "\"";
}

// The value of a top-level key of the config, if it is a plain string (no escapes needed for
// paths and versions) or a number. Nested objects and arrays are skipped whole.
std::string topLevelValue(const std::string &json, const std::string &key) {
  int depth = 0;
  bool inString = false;
  size_t start = 0;
  for (size_t i = 0; i < json.size(); i++) {
    char c = json[i];
    if (inString) {
      if (c == '\\') i++;
      else if (c == '"') {
        inString = false;
        if (depth != 1) continue;
        std::string token = json.substr(start, i - start);
        size_t j = i + 1;
        while (j < json.size() && isspace((unsigned char)json[j])) j++;
        if (j >= json.size() || json[j] != ':' || token != key) continue;
        j++;
        while (j < json.size() && isspace((unsigned char)json[j])) j++;
        if (j < json.size() && json[j] == '"') {
          size_t end = json.find('"', j + 1);
          return end == std::string::npos ? "" : json.substr(j + 1, end - j - 1);
        }
        size_t end = j;
        while (end < json.size() && (isdigit((unsigned char)json[end]) || json[end] == '.')) end++;
        return json.substr(j, end - j);
      }
      continue;
    }
    if (c == '"') {
      inString = true;
      start = i + 1;
    } else if (c == '{' || c == '[') {
      depth++;
    } else if (c == '}' || c == ']') {
      depth--;
    }
  }
  return "";
}

std::string env(const char *name) {
  const char *v = getenv(name);
  return v ? v : "";
}

int fail(const std::string &cniVersion, int code, const std::string &msg, const std::string &details) {
  std::string out = "{\"cniVersion\":" + jsonString(cniVersion.empty() ? "1.0.0" : cniVersion) +
                    ",\"code\":" + std::to_string(code) + ",\"msg\":" + jsonString(msg) +
                    ",\"details\":" + jsonString(details) + "}\n";
  writeAll(1, out);
  return 1;
}

// Connects to the daemon within the deadline; -1 with errno set when it is not there.
int connectDaemon(const std::string &path, int timeoutSeconds) {
  sockaddr_un addr{};
  if (path.size() >= sizeof addr.sun_path) {
    errno = ENAMETOOLONG;
    return -1;
  }
  addr.sun_family = AF_UNIX;
  memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  timeval tv{timeoutSeconds, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  if (connect(fd, reinterpret_cast<sockaddr *>(&addr), sizeof addr) != 0) {
    int saved = errno;
    close(fd);
    errno = saved;
    return -1;
  }
  return fd;
}

long long monotonicMs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

// Connects, trying again while the daemon is starting (no socket file yet, or one nobody
// accepts on) until waitSeconds have passed; -1 with errno from the last try.
int connectWaiting(const std::string &path, int timeoutSeconds, int waitSeconds) {
  const long long until = monotonicMs() + waitSeconds * 1000LL;
  for (;;) {
    int fd = connectDaemon(path, timeoutSeconds);
    if (fd >= 0 || (errno != ENOENT && errno != ECONNREFUSED) || monotonicMs() >= until) return fd;
    usleep(kConnectRetryMs * 1000);
  }
}

// Reads the answer, bounded by the whole-call deadline (SO_RCVTIMEO bounds each read only).
bool readAnswer(int fd, time_t deadline, std::string &out) {
  char buf[65536];
  for (;;) {
    int left = int(deadline - time(nullptr));
    if (left <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    int r = poll(&p, 1, left * 1000);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    ssize_t n = read(fd, buf, sizeof buf);
    if (n > 0) out.append(buf, size_t(n));
    else if (n == 0) return true;
    else if (errno != EINTR) return false;
  }
}

bool fsyncDir(const std::string &dir) {
  int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return false;
  bool ok = fsync(fd) == 0;
  close(fd);
  return ok;
}

// Writes the DEL durably (temp file, fsync, rename, fsync dir) for the daemon to replay.
bool queueDelete(const std::string &dir, const std::string &containerId, const std::string &ifname,
                 const std::string &request) {
  mkdir(dir.c_str(), 0700);
  std::string name;
  for (char c : containerId + "." + ifname) name += (isalnum((unsigned char)c) || c == '-' || c == '.' || c == '_') ? c : '_';
  std::string final = dir + "/" + name + ".json";
  std::string tmp = dir + "/.tmp-" + std::to_string(getpid()) + "-" + name;
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  bool ok = writeAll(fd, request) && fsync(fd) == 0;
  close(fd);
  if (!ok || rename(tmp.c_str(), final.c_str()) != 0) {
    unlink(tmp.c_str());
    return false;
  }
  return fsyncDir(dir);
}

// CNI 1.1: STATUS reports "not ready" as 50 (plugin not available); other verbs ask the
// runtime to retry (11).
int unavailableCode(const std::string &command) { return command == "STATUS" ? 50 : 11; }

}  // namespace

int main() {
  std::string config = readAll(0);
  std::string command = env("CNI_COMMAND");
  std::string cniVersion = topLevelValue(config, "cniVersion");

  if (command == "VERSION") {
    // Answered here: a runtime may ask before the daemon runs.
    writeAll(1, "{\"cniVersion\":" + jsonString(cniVersion.empty() ? "1.1.0" : cniVersion) +
                    ",\"supportedVersions\":" + kSupportedVersions + "}\n");
    return 0;
  }
  if (command.empty()) return fail(cniVersion, 4, "CNI_COMMAND is not set", "knit-cni is a CNI plugin; a container runtime runs it");

  std::string socketPath = topLevelValue(config, "socket");
  if (socketPath.empty()) socketPath = kDefaultSocket;
  std::string queueDir = topLevelValue(config, "deleteQueue");
  if (queueDir.empty()) queueDir = kDefaultDeleteQueue;
  int timeoutSeconds = atoi(topLevelValue(config, "timeoutSeconds").c_str());
  if (timeoutSeconds <= 0) timeoutSeconds = kDefaultTimeoutSeconds;
  std::string waitText = topLevelValue(config, "daemonWaitSeconds");
  int waitSeconds = waitText.empty() ? kDefaultDaemonWaitSeconds : atoi(waitText.c_str());
  // STATUS reports readiness as it is; a DEL has its queue.
  if (command == "STATUS" || command == "DEL" || waitSeconds < 0) waitSeconds = 0;
  if (waitSeconds > timeoutSeconds) waitSeconds = timeoutSeconds;

  std::string request = "{\"v\":1,\"command\":" + jsonString(command) +
                        ",\"containerId\":" + jsonString(env("CNI_CONTAINERID")) +
                        ",\"netns\":" + jsonString(env("CNI_NETNS")) +
                        ",\"ifname\":" + jsonString(env("CNI_IFNAME")) +
                        ",\"args\":" + jsonString(env("CNI_ARGS")) +
                        ",\"path\":" + jsonString(env("CNI_PATH")) +
                        ",\"config\":" + jsonString(config) + "}";

  time_t deadline = time(nullptr) + timeoutSeconds;
  int fd = connectWaiting(socketPath, timeoutSeconds, waitSeconds);
  if (fd < 0) {
    std::string why = strerror(errno);
    if (waitSeconds > 0) why += " (waited " + std::to_string(waitSeconds) + " s for it)";
    if (command == "DEL") {
      if (queueDelete(queueDir, env("CNI_CONTAINERID"), env("CNI_IFNAME"), request)) return 0;
      return fail(cniVersion, 11, "knit daemon unreachable at " + socketPath + " and the delete could not be queued in " + queueDir,
                  strerror(errno));
    }
    return fail(cniVersion, unavailableCode(command), "knit daemon unreachable at " + socketPath + ": " + why, "try again when the knit daemon runs");
  }
  std::string answer;
  bool sent = writeAll(fd, request) && shutdown(fd, SHUT_WR) == 0;
  bool complete = sent && readAnswer(fd, deadline, answer);
  close(fd);
  const std::string header = "knit-cni/1 ";
  size_t eol = answer.find('\n');
  if (!complete || eol == std::string::npos || answer.compare(0, header.size(), header) != 0) {
    if (command == "DEL" && queueDelete(queueDir, env("CNI_CONTAINERID"), env("CNI_IFNAME"), request)) return 0;
    return fail(cniVersion, unavailableCode(command), "knit daemon at " + socketPath + (complete ? " gave no answer" : " did not answer in time"),
                "the daemon stopped or timed out mid-call (timeoutSeconds " + std::to_string(timeoutSeconds) + ")");
  }
  int exitCode = atoi(answer.c_str() + header.size());
  writeAll(1, answer.substr(eol + 1));
  return exitCode;
}
