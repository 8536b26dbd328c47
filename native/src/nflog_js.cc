// JS class NflogReader: new NflogReader(netnsPath | undefined, group, copyRange, callback).
// The reader thread hands each batch of logged packets to JS through a ThreadSafeFunction; the
// callback receives an array of plain objects (src/net/nflog.ts types them).
#include <napi.h>
#include <netinet/in.h>

#include <memory>
#include <string>
#include <vector>

#include "bindings.h"
#include "errors.h"
#include "js_reader.h"
#include "nflog.h"
#include "nsfd_args.h"

namespace knit {
namespace {

Napi::Object EventToJs(Napi::Env env, const NflogEvent& e) {
  Napi::Object o = Napi::Object::New(env);
  switch (e.type) {
    case NflogEvent::kPacket:
      o.Set("type", "packet");
      o.Set("family", e.family == 10 /* NFPROTO_IPV6 */ ? 6 : e.family == 2 /* NFPROTO_IPV4 */ ? 4 : 0);
      o.Set("hook", e.hook);
      o.Set("prefix", e.prefix);
      o.Set("indev", e.indev);
      o.Set("outdev", e.outdev);
      o.Set("physindev", e.physindev);
      o.Set("physoutdev", e.physoutdev);
      o.Set("timeMs", static_cast<double>(e.timeNs) / 1e6);
      o.Set("payload", Napi::Buffer<uint8_t>::Copy(env, e.payload.data(), e.payload.size()));
      break;
    case NflogEvent::kOverrun:
      o.Set("type", "overrun");
      break;
    case NflogEvent::kError:
      o.Set("type", "error");
      o.Set("code", ErrnoName(e.err));
      o.Set("errno", e.err);
      break;
  }
  return o;
}

void DeliverBatch(Napi::Env env, Napi::Function callback, std::vector<NflogEvent>* batch) {
  std::unique_ptr<std::vector<NflogEvent>> owned(batch);
  if (env == nullptr || callback.IsEmpty()) return;  // environment shutting down
  Napi::Array arr = Napi::Array::New(env, owned->size());
  for (size_t i = 0; i < owned->size(); i++) arr.Set(static_cast<uint32_t>(i), EventToJs(env, (*owned)[i]));
  callback.Call({arr});
}

class NflogWrap : public Napi::ObjectWrap<NflogWrap> {
 public:
  static void Init(Napi::Env env, Napi::Object exports) {
    Napi::Function ctor = DefineClass(env, "NflogReader",
                                      {InstanceMethod("close", &NflogWrap::Close), InstanceMethod("ref", &NflogWrap::Ref),
                                       InstanceMethod("unref", &NflogWrap::Unref)});
    exports.Set("NflogReader", ctor);
  }

  explicit NflogWrap(const Napi::CallbackInfo& info) : Napi::ObjectWrap<NflogWrap>(info) {
    Napi::Env env = info.Env();
    std::string nsPath;
    if (info.Length() > 0 && !info[0].IsUndefined() && (!ArgString(info, 0, "netnsPath", &nsPath) || nsPath.empty())) {
      if (!env.IsExceptionPending()) {
        Napi::TypeError::New(env, "netnsPath must be a path or undefined (the daemon's netns)").ThrowAsJavaScriptException();
      }
      return;
    }
    int64_t group = 0, copyRange = 0;
    if (!ArgUint(info, 1, "group", 65535, &group) || !ArgUint(info, 2, "copyRange", 65535, &copyRange)) return;
    if (info.Length() <= 3 || !info[3].IsFunction()) {
      Napi::TypeError::New(env, "callback must be a function").ThrowAsJavaScriptException();
      return;
    }
    OpError err;
    if (NflogReader::Open(nsPath, static_cast<uint16_t>(group), static_cast<uint32_t>(copyRange), &reader_, &err) < 0) {
      MakeOpError(env, err).ThrowAsJavaScriptException();
      return;
    }
    Napi::ThreadSafeFunction tsfn = js_.Begin(env, info[3].As<Napi::Function>(), "knit:nflog");
    reader_->Start([tsfn](std::vector<NflogEvent>&& events) mutable {
      auto* batch = new std::vector<NflogEvent>(std::move(events));
      if (tsfn.NonBlockingCall(batch, DeliverBatch) != napi_ok) delete batch;
    });
    js_.Arm(env, [this] {
      reader_->Stop();
      reader_.reset();
    });
  }

  ~NflogWrap() override { js_.End(Env()); }

 private:
  Napi::Value Close(const Napi::CallbackInfo& info) {
    js_.End(info.Env());
    return info.Env().Undefined();
  }
  Napi::Value Ref(const Napi::CallbackInfo& info) {
    js_.Ref(info.Env());
    return info.Env().Undefined();
  }
  Napi::Value Unref(const Napi::CallbackInfo& info) {
    js_.Unref(info.Env());
    return info.Env().Undefined();
  }

  std::unique_ptr<NflogReader> reader_;
  JsReader js_;
};

}  // namespace

void InitNflogBindings(Napi::Env env, Napi::Object exports) { NflogWrap::Init(env, exports); }

}  // namespace knit
