// JS bindings for fd passing. The synchronous calls never block the JS thread (MSG_DONTWAIT:
// a full or empty socket throws EAGAIN); the Promise calls wait on a libuv pool thread.
//
// Sockets from Node (`socket._handle.fd` of a net.Socket) are non-blocking and libuv keeps
// polling them for reads; writing a reply with fds next to that is fine as long as nothing is
// queued through socket.write() at the same time (bytes would interleave).
#include <fcntl.h>
#include <napi.h>
#include <unistd.h>

#include <cstdint>
#include <string>
#include <vector>

#include "errors.h"
#include "fdpass.h"
#include "nsfd_args.h"
#include "bindings.h"

namespace knit {
namespace {

constexpr int64_t kMaxFd = INT32_MAX;
constexpr int64_t kMaxTimeoutMs = 3600 * 1000;

bool ArgBuffer(const Napi::CallbackInfo& info, size_t i, const char* name, std::string* out) {
  if (info.Length() <= i || !info[i].IsBuffer()) {
    Napi::TypeError::New(info.Env(), std::string(name) + " must be a Buffer").ThrowAsJavaScriptException();
    return false;
  }
  auto buf = info[i].As<Napi::Buffer<char>>();
  out->assign(buf.Data(), buf.Length());
  return true;
}

bool ArgFds(const Napi::CallbackInfo& info, size_t i, std::vector<int>* out) {
  Napi::Env env = info.Env();
  if (info.Length() <= i || !info[i].IsArray()) {
    Napi::TypeError::New(env, "fds must be an array of file descriptors").ThrowAsJavaScriptException();
    return false;
  }
  auto arr = info[i].As<Napi::Array>();
  if (arr.Length() > kMaxPassFds) {
    Napi::RangeError::New(env, "fds: at most " + std::to_string(kMaxPassFds) + " per message").ThrowAsJavaScriptException();
    return false;
  }
  for (uint32_t k = 0; k < arr.Length(); k++) {
    Napi::Value v = arr.Get(k);
    double d = v.IsNumber() ? v.As<Napi::Number>().DoubleValue() : -1;
    if (d < 0 || d > kMaxFd || d != static_cast<double>(static_cast<int>(d))) {
      Napi::TypeError::New(env, "fds[" + std::to_string(k) + "] must be a file descriptor (integer >= 0)")
          .ThrowAsJavaScriptException();
      return false;
    }
    out->push_back(static_cast<int>(d));
  }
  return true;
}

Napi::Value Throw(Napi::Env env, int errnum, const std::string& context) {
  OpError e;
  e.err = errnum;
  e.context = context;
  MakeOpError(env, e).ThrowAsJavaScriptException();
  return env.Undefined();
}

Napi::Object ReplyToJs(Napi::Env env, const std::string& data, const std::vector<int>& fds) {
  Napi::Object o = Napi::Object::New(env);
  o.Set("data", Napi::Buffer<char>::Copy(env, data.data(), data.size()));
  Napi::Array arr = Napi::Array::New(env, fds.size());
  for (size_t k = 0; k < fds.size(); k++) arr.Set(static_cast<uint32_t>(k), Napi::Number::New(env, fds[k]));
  o.Set("fds", arr);
  return o;
}

// sendFds(socketFd, data, fds): number of bytes sent; throws EAGAIN when the buffer is full.
Napi::Value SendFds(const Napi::CallbackInfo& info) {
  int64_t sock;
  std::string data;
  std::vector<int> fds;
  if (!ArgUint(info, 0, "socketFd", kMaxFd, &sock) || !ArgBuffer(info, 1, "data", &data) || !ArgFds(info, 2, &fds)) {
    return info.Env().Undefined();
  }
  if (!fds.empty() && data.empty()) {
    Napi::RangeError::New(info.Env(), "data must not be empty when fds are sent (fds ride on its first byte)")
        .ThrowAsJavaScriptException();
    return info.Env().Undefined();
  }
  long n = SendFdsOnce(static_cast<int>(sock), data.data(), data.size(), fds);
  if (n < 0) return Throw(info.Env(), static_cast<int>(-n), "send fds on fd " + std::to_string(sock));
  return Napi::Number::New(info.Env(), static_cast<double>(n));
}

// Owns duplicates of the socket and of the fds to send, so JS may close or destroy its
// copies the moment the call returns.
class SendWorker : public Napi::AsyncWorker {
 public:
  SendWorker(Napi::Env env, int sock, std::string data, std::vector<int> fds, int timeoutMs)
      : Napi::AsyncWorker(env, "knit:sendFds"),
        deferred_(Napi::Promise::Deferred::New(env)),
        sock_(sock),
        data_(std::move(data)),
        fds_(std::move(fds)),
        timeoutMs_(timeoutMs) {}
  ~SendWorker() override {
    if (sock_ >= 0) close(sock_);
    for (int fd : fds_) close(fd);
  }
  Napi::Promise Promise() { return deferred_.Promise(); }

 protected:
  void Execute() override { rc_ = SendFdsAll(sock_, data_, fds_, timeoutMs_, &err_); }
  void OnOK() override {
    if (rc_ < 0) deferred_.Reject(MakeOpError(Env(), err_).Value());
    else deferred_.Resolve(Env().Undefined());
  }

 private:
  Napi::Promise::Deferred deferred_;
  int sock_;
  std::string data_;
  std::vector<int> fds_;
  int timeoutMs_;
  OpError err_;
  int rc_ = 0;
};

bool DupAll(const std::vector<int>& in, std::vector<int>* out, int* failedErrno, size_t* failedAt) {
  for (size_t k = 0; k < in.size(); k++) {
    int d = fcntl(in[k], F_DUPFD_CLOEXEC, 0);
    if (d < 0) {
      *failedErrno = errno;
      *failedAt = k;
      for (int fd : *out) close(fd);
      out->clear();
      return false;
    }
    out->push_back(d);
  }
  return true;
}

// sendFdsAsync(socketFd, data, fds, timeoutMs): Promise<void>, resolved once all of data
// (fds with its first byte) is in the socket.
Napi::Value SendFdsAsync(const Napi::CallbackInfo& info) {
  int64_t sock, timeoutMs;
  std::string data;
  std::vector<int> fds;
  if (!ArgUint(info, 0, "socketFd", kMaxFd, &sock) || !ArgBuffer(info, 1, "data", &data) || !ArgFds(info, 2, &fds) ||
      !ArgUint(info, 3, "timeoutMs", kMaxTimeoutMs, &timeoutMs)) {
    return info.Env().Undefined();
  }
  if (data.empty()) {
    Napi::RangeError::New(info.Env(), "data must not be empty").ThrowAsJavaScriptException();
    return info.Env().Undefined();
  }
  std::vector<int> dups;
  int e = 0;
  size_t at = 0;
  if (!DupAll({static_cast<int>(sock)}, &dups, &e, &at)) {
    return Throw(info.Env(), e, "send fds: socketFd " + std::to_string(sock));
  }
  int sockDup = dups[0];
  dups.clear();
  if (!DupAll(fds, &dups, &e, &at)) {
    close(sockDup);
    return Throw(info.Env(), e, "send fds: fds[" + std::to_string(at) + "] = " + std::to_string(fds[at]));
  }
  auto* worker = new SendWorker(info.Env(), sockDup, std::move(data), std::move(dups), static_cast<int>(timeoutMs));
  Napi::Promise promise = worker->Promise();
  worker->Queue();
  return promise;
}

// recvFds(socketFd, maxFds, maxBytes = 65536): {data, fds}; throws EAGAIN when nothing is
// waiting. Empty data = the peer closed.
Napi::Value RecvFds(const Napi::CallbackInfo& info) {
  int64_t sock, maxFds, maxBytes = 65536;
  if (!ArgUint(info, 0, "socketFd", kMaxFd, &sock) || !ArgUint(info, 1, "maxFds", kMaxPassFds, &maxFds)) {
    return info.Env().Undefined();
  }
  if (info.Length() > 2 && !info[2].IsUndefined() && !ArgUint(info, 2, "maxBytes", 16 << 20, &maxBytes)) {
    return info.Env().Undefined();
  }
  std::string data;
  std::vector<int> fds;
  int rc = RecvFdsOnce(static_cast<int>(sock), static_cast<size_t>(maxBytes), static_cast<size_t>(maxFds), &data, &fds);
  if (rc < 0) {
    return Throw(info.Env(), -rc,
                 rc == -EMSGSIZE ? "receive fds: message carried more than " + std::to_string(maxFds) + " fds (all closed)"
                                 : "receive fds on fd " + std::to_string(sock));
  }
  return ReplyToJs(info.Env(), data, fds);
}

class RequestWorker : public Napi::AsyncWorker {
 public:
  RequestWorker(Napi::Env env, std::string path, std::string request, int timeoutMs, size_t maxFds, size_t maxBytes)
      : Napi::AsyncWorker(env, "knit:requestFds"),
        deferred_(Napi::Promise::Deferred::New(env)),
        path_(std::move(path)),
        request_(std::move(request)),
        timeoutMs_(timeoutMs),
        maxFds_(maxFds),
        maxBytes_(maxBytes) {}
  // Received fds not handed to JS (the environment went away first) are not leaked.
  ~RequestWorker() override {
    for (int fd : fds_) close(fd);
  }
  Napi::Promise Promise() { return deferred_.Promise(); }

 protected:
  void Execute() override { rc_ = RequestFds(path_, request_, timeoutMs_, maxBytes_, maxFds_, &data_, &fds_, &err_); }
  void OnOK() override {
    if (rc_ < 0) {
      deferred_.Reject(MakeOpError(Env(), err_).Value());
      return;
    }
    deferred_.Resolve(ReplyToJs(Env(), data_, fds_));
    fds_.clear();  // now JS owns them
  }

 private:
  Napi::Promise::Deferred deferred_;
  std::string path_, request_, data_;
  int timeoutMs_;
  size_t maxFds_, maxBytes_;
  std::vector<int> fds_;
  OpError err_;
  int rc_ = 0;
};

// requestFds(socketPath, request, timeoutMs, maxFds = 253, maxBytes = 1 MiB): Promise<{data, fds}>
Napi::Value RequestFdsJs(const Napi::CallbackInfo& info) {
  std::string path, request;
  int64_t timeoutMs, maxFds = kMaxPassFds, maxBytes = 1 << 20;
  if (!ArgString(info, 0, "socketPath", &path) || !ArgBuffer(info, 1, "request", &request) ||
      !ArgUint(info, 2, "timeoutMs", kMaxTimeoutMs, &timeoutMs)) {
    return info.Env().Undefined();
  }
  if (info.Length() > 3 && !info[3].IsUndefined() && !ArgUint(info, 3, "maxFds", kMaxPassFds, &maxFds)) {
    return info.Env().Undefined();
  }
  if (info.Length() > 4 && !info[4].IsUndefined() && !ArgUint(info, 4, "maxBytes", 16 << 20, &maxBytes)) {
    return info.Env().Undefined();
  }
  auto* worker = new RequestWorker(info.Env(), path, request, static_cast<int>(timeoutMs), static_cast<size_t>(maxFds),
                                   static_cast<size_t>(maxBytes));
  Napi::Promise promise = worker->Promise();
  worker->Queue();
  return promise;
}

// closeFd(fd): for fds Node does not own (received ones); EBADF throws.
Napi::Value CloseFd(const Napi::CallbackInfo& info) {
  int64_t fd;
  if (!ArgUint(info, 0, "fd", kMaxFd, &fd)) return info.Env().Undefined();
  // Linux closes the fd even when close() reports EINTR, so never retry.
  if (close(static_cast<int>(fd)) < 0 && errno != EINTR) return Throw(info.Env(), errno, "close fd " + std::to_string(fd));
  return info.Env().Undefined();
}

}  // namespace

void InitFdpassBindings(Napi::Env env, Napi::Object exports) {
  exports.Set("sendFds", Napi::Function::New(env, SendFds, "sendFds"));
  exports.Set("sendFdsAsync", Napi::Function::New(env, SendFdsAsync, "sendFdsAsync"));
  exports.Set("recvFds", Napi::Function::New(env, RecvFds, "recvFds"));
  exports.Set("requestFds", Napi::Function::New(env, RequestFdsJs, "requestFds"));
  exports.Set("closeFd", Napi::Function::New(env, CloseFd, "closeFd"));
}

}  // namespace knit
