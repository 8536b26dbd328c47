// The JS `Handle` class: a NETLINK_ROUTE socket opened inside one network namespace, running
// batches of ops (src/net/ops.ts) there. The facade is src/net/handle.ts.
//
//   new Handle(netnsPath?)      absent: the daemon's own netns
//   run(ops): Promise<results>  on a libuv pool thread (the socket already lives in the netns)
//   runSync(ops): results       on the calling thread, for ops that take microseconds
//   encode(op): Buffer          the request bytes op would send, seq and pid 0
//   close()                     also done when the handle is garbage-collected
//   Handle.decodeLink(buf)      parses one RTM_NEWLINK message (tests of VF parsing)
//   Handle.runIn(netnsPath, ops): Promise<results>
//                               one batch in a pod's netns: opens the netns and a socket, runs,
//                               closes, all in one pool hop (the JS thread only checks ops)
#pragma once
#include <napi.h>

#include <errno.h>

#include <mutex>
#include <string>

#include "errors.h"
#include "nl/op.h"
#include "nl/socket.h"

namespace knit {

class Handle : public Napi::ObjectWrap<Handle> {
 public:
  static void Init(Napi::Env env, Napi::Object exports);
  explicit Handle(const Napi::CallbackInfo& info);
  ~Handle() override;

  // Runs fn(ctx) holding the socket's lock (the JS thread and pool threads share it), or
  // answers EBADF when the handle is closed.
  template <typename F>
  int WithContext(OpError* err, F fn) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!socket_.IsOpen()) {
      err->err = EBADF;
      err->index = 0;
      return -EBADF;
    }
    nl::RunContext ctx{&socket_, nsfd_};
    return fn(ctx);
  }
  void CloseNow();

 private:
  Napi::Value Run(const Napi::CallbackInfo& info);
  Napi::Value RunSync(const Napi::CallbackInfo& info);
  Napi::Value Encode(const Napi::CallbackInfo& info);
  Napi::Value Close(const Napi::CallbackInfo& info);
  Napi::Value GetNetns(const Napi::CallbackInfo& info);
  Napi::Value GetClosed(const Napi::CallbackInfo& info);
  static Napi::Value DecodeLink(const Napi::CallbackInfo& info);
  static Napi::Value RunIn(const Napi::CallbackInfo& info);

  std::mutex mu_;
  nl::Socket socket_;
  int nsfd_ = -1;
  std::string netns_;
};

}  // namespace knit
