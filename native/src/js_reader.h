// The JS end of an addon object whose own reader thread calls into JS (monitor_js.cc,
// packet_taps_js.cc): the ThreadSafeFunction the thread calls through, and the order of the
// end. The thread is stopped (joined) before the function is released, so no call can be
// queued after the release; and a worker thread's environment can go away without close(),
// so a cleanup hook ends it then.
#pragma once
#include <napi.h>

#include <functional>

namespace knit {

class JsReader {
 public:
  // First: the function the reader's sink calls (capture the returned copy in the sink).
  Napi::ThreadSafeFunction Begin(Napi::Env env, Napi::Function callback, const char* name) {
    tsfn_ = Napi::ThreadSafeFunction::New(env, callback, name, 0, 1);
    return tsfn_;
  }
  // Then, once the thread runs: stop joins it. Without Arm (the thread did not start), Abandon.
  void Arm(Napi::Env env, std::function<void()> stop) {
    stop_ = std::move(stop);
    cleanup_ = env.AddCleanupHook(std::function<void()>([this] {
      hooked_ = false;  // node frees the hook after this call
      End(nullptr);
    }));
    hooked_ = true;
    open_ = true;
  }
  void Abandon() { tsfn_.Release(); }

  bool open() const { return open_; }
  // env is null when the environment itself is ending (the hook removes itself then).
  void End(napi_env env) {
    if (hooked_ && env != nullptr) {
      hooked_ = false;
      cleanup_.Remove(Napi::Env(env));
    }
    if (!open_) return;
    open_ = false;
    stop_();
    tsfn_.Release();
  }
  void Ref(Napi::Env env) {
    if (open_) tsfn_.Ref(env);
  }
  void Unref(Napi::Env env) {
    if (open_) tsfn_.Unref(env);
  }

 private:
  Napi::ThreadSafeFunction tsfn_;
  std::function<void()> stop_;
  Napi::Env::CleanupHook<std::function<void()>> cleanup_;
  bool hooked_ = false;
  bool open_ = false;
};

}  // namespace knit
