// JS class Monitor: new Monitor(netnsPath | undefined, groups, callback, options?).
// The reader thread hands each batch of events to JS through a ThreadSafeFunction; the JS
// callback receives an array of plain event objects.
#include <napi.h>
#include <sys/socket.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "errors.h"
#include "js_reader.h"
#include "monitor.h"
#include "nsfd_args.h"
#include "bindings.h"

namespace knit {
namespace {

// As `ip -j link` prints them (RFC 2863 names, IF_OPER_* order).
const char* OperstateName(int s) {
  static const char* const kNames[] = {"UNKNOWN", "NOTPRESENT", "DOWN", "LOWERLAYERDOWN", "TESTING", "DORMANT", "UP"};
  return s >= 0 && s < 7 ? kNames[s] : "UNKNOWN";
}

Napi::Object EventToJs(Napi::Env env, const RtEvent& e) {
  Napi::Object o = Napi::Object::New(env);
  switch (e.type) {
    case RtEvent::kLink:
      o.Set("type", "link");
      o.Set("index", e.index);
      o.Set("name", e.name);
      o.Set("up", e.up);
      o.Set("lowerUp", e.lowerUp);
      o.Set("operstate", OperstateName(e.operstate));
      o.Set("removed", e.removed);
      if (!e.kind.empty()) o.Set("kind", e.kind);
      break;
    case RtEvent::kAddress:
      o.Set("type", "address");
      o.Set("index", e.index);
      o.Set("family", e.family == AF_INET6 ? 6 : 4);
      o.Set("address", e.address);
      o.Set("prefixLen", e.prefixLen);
      o.Set("removed", e.removed);
      break;
    case RtEvent::kOverrun:
      o.Set("type", "overrun");
      break;
    case RtEvent::kError:
      o.Set("type", "error");
      o.Set("code", ErrnoName(e.err));
      o.Set("errno", e.err);
      break;
  }
  return o;
}

void DeliverBatch(Napi::Env env, Napi::Function callback, std::vector<RtEvent>* batch) {
  std::unique_ptr<std::vector<RtEvent>> owned(batch);
  if (env == nullptr || callback.IsEmpty()) return;  // environment shutting down
  Napi::Array arr = Napi::Array::New(env, owned->size());
  for (size_t i = 0; i < owned->size(); i++) arr.Set(static_cast<uint32_t>(i), EventToJs(env, (*owned)[i]));
  callback.Call({arr});
}

bool ParseGroups(const Napi::CallbackInfo& info, size_t i, unsigned* mask) {
  Napi::Env env = info.Env();
  if (info.Length() <= i || !info[i].IsArray() || info[i].As<Napi::Array>().Length() == 0) {
    Napi::TypeError::New(env, "groups must be a non-empty array of 'link' | 'ipv4-addr' | 'ipv6-addr'")
        .ThrowAsJavaScriptException();
    return false;
  }
  auto arr = info[i].As<Napi::Array>();
  *mask = 0;
  for (uint32_t k = 0; k < arr.Length(); k++) {
    Napi::Value v = arr.Get(k);
    std::string g = v.IsString() ? v.As<Napi::String>().Utf8Value() : "";
    if (g == "link") *mask |= kGroupLink;
    else if (g == "ipv4-addr") *mask |= kGroupIpv4Addr;
    else if (g == "ipv6-addr") *mask |= kGroupIpv6Addr;
    else {
      Napi::TypeError::New(env, "groups[" + std::to_string(k) + "] must be 'link', 'ipv4-addr' or 'ipv6-addr'")
          .ThrowAsJavaScriptException();
      return false;
    }
  }
  return true;
}

class MonitorWrap : public Napi::ObjectWrap<MonitorWrap> {
 public:
  static void Init(Napi::Env env, Napi::Object exports) {
    Napi::Function ctor = DefineClass(env, "Monitor",
                                      {InstanceMethod("close", &MonitorWrap::Close), InstanceMethod("ref", &MonitorWrap::Ref),
                                       InstanceMethod("unref", &MonitorWrap::Unref),
                                       InstanceMethod("pause", &MonitorWrap::Pause),
                                       InstanceMethod("resume", &MonitorWrap::Resume)});
    exports.Set("Monitor", ctor);
  }

  explicit MonitorWrap(const Napi::CallbackInfo& info) : Napi::ObjectWrap<MonitorWrap>(info) {
    Napi::Env env = info.Env();
    std::string nsPath;
    if (info.Length() > 0 && !info[0].IsUndefined() && !ArgString(info, 0, "netnsPath", &nsPath)) return;
    if (info.Length() > 0 && info[0].IsString() && nsPath.empty()) {
      Napi::TypeError::New(env, "netnsPath must be a path or undefined (the daemon's netns)").ThrowAsJavaScriptException();
      return;
    }
    unsigned groups = 0;
    if (!ParseGroups(info, 1, &groups)) return;
    if (info.Length() <= 2 || !info[2].IsFunction()) {
      Napi::TypeError::New(env, "callback must be a function").ThrowAsJavaScriptException();
      return;
    }
    int64_t rcvbuf = 0;
    if (info.Length() > 3 && info[3].IsObject()) {
      Napi::Value v = info[3].As<Napi::Object>().Get("receiveBufferBytes");
      if (!v.IsUndefined()) {
        double d = v.IsNumber() ? v.As<Napi::Number>().DoubleValue() : -1;
        if (d < 1 || d > (1 << 30) || d != static_cast<double>(static_cast<int64_t>(d))) {
          Napi::TypeError::New(env, "options.receiveBufferBytes must be an integer from 1 to 2^30")
              .ThrowAsJavaScriptException();
          return;
        }
        rcvbuf = static_cast<int64_t>(d);
      }
    }
    OpError err;
    if (RtMonitor::Open(nsPath, groups, static_cast<int>(rcvbuf), &monitor_, &err) < 0) {
      MakeOpError(env, err).ThrowAsJavaScriptException();
      return;
    }
    Napi::ThreadSafeFunction tsfn = reader_.Begin(env, info[2].As<Napi::Function>(), "knit:monitor");
    monitor_->Start([tsfn](std::vector<RtEvent>&& events) mutable {
      auto* batch = new std::vector<RtEvent>(std::move(events));
      if (tsfn.NonBlockingCall(batch, DeliverBatch) != napi_ok) delete batch;
    });
    reader_.Arm(env, [this] {
      monitor_->Stop();
      monitor_.reset();
    });
  }

  ~MonitorWrap() override { reader_.End(Env()); }

 private:
  Napi::Value Close(const Napi::CallbackInfo& info) {
    reader_.End(info.Env());
    return info.Env().Undefined();
  }
  Napi::Value Ref(const Napi::CallbackInfo& info) {
    reader_.Ref(info.Env());
    return info.Env().Undefined();
  }
  Napi::Value Unref(const Napi::CallbackInfo& info) {
    reader_.Unref(info.Env());
    return info.Env().Undefined();
  }
  Napi::Value Pause(const Napi::CallbackInfo& info) {
    if (reader_.open()) monitor_->Pause();
    return info.Env().Undefined();
  }
  Napi::Value Resume(const Napi::CallbackInfo& info) {
    if (reader_.open()) monitor_->Resume();
    return info.Env().Undefined();
  }

  std::unique_ptr<RtMonitor> monitor_;
  JsReader reader_;
};

}  // namespace

void InitMonitorBindings(Napi::Env env, Napi::Object exports) { MonitorWrap::Init(env, exports); }

}  // namespace knit
