// JS class PacketTaps: new PacketTaps(callback); open(netnsPath, ifname) -> {id, ifindex};
// send(id, buffer); close(id); shutdown(); ref(); unref(). The reader thread hands batches to
// JS through a ThreadSafeFunction: callback([{id, frame, wireLength, partialChecksum} | {id, code, errno} |
// {id, overBudget}]).
#include <napi.h>

#include <memory>
#include <string>
#include <vector>

#include "bindings.h"
#include "errors.h"
#include "js_reader.h"
#include "nsfd_args.h"
#include "packet_taps.h"

namespace knit {
namespace {

void DeliverBatch(Napi::Env env, Napi::Function callback, std::vector<PacketEvent>* batch) {
  std::unique_ptr<std::vector<PacketEvent>> owned(batch);
  if (env == nullptr || callback.IsEmpty()) return;
  Napi::Array arr = Napi::Array::New(env, owned->size());
  for (size_t i = 0; i < owned->size(); i++) {
    const PacketEvent& e = (*owned)[i];
    Napi::Object o = Napi::Object::New(env);
    o.Set("id", e.id);
    if (e.err) {
      o.Set("code", ErrnoName(e.err));
      o.Set("errno", e.err);
    } else if (e.overBudget) {
      o.Set("overBudget", static_cast<double>(e.overBudget));
    } else {
      o.Set("frame", Napi::Buffer<uint8_t>::Copy(env, e.frame.data(), e.frame.size()));
      o.Set("wireLength", static_cast<double>(e.wireLength));
      o.Set("partialChecksum", e.partialChecksum);
    }
    arr.Set(static_cast<uint32_t>(i), o);
  }
  callback.Call({arr});
}

class PacketTapsWrap : public Napi::ObjectWrap<PacketTapsWrap> {
 public:
  static void Init(Napi::Env env, Napi::Object exports) {
    Napi::Function ctor = DefineClass(env, "PacketTaps",
                                      {InstanceMethod("open", &PacketTapsWrap::Open), InstanceMethod("send", &PacketTapsWrap::Send),
                                       InstanceMethod("close", &PacketTapsWrap::Close),
                                       InstanceMethod("shutdown", &PacketTapsWrap::ShutdownJs),
                                       InstanceMethod("ref", &PacketTapsWrap::Ref), InstanceMethod("unref", &PacketTapsWrap::Unref)});
    exports.Set("PacketTaps", ctor);
  }

  explicit PacketTapsWrap(const Napi::CallbackInfo& info) : Napi::ObjectWrap<PacketTapsWrap>(info) {
    Napi::Env env = info.Env();
    if (info.Length() < 1 || !info[0].IsFunction()) {
      Napi::TypeError::New(env, "callback must be a function").ThrowAsJavaScriptException();
      return;
    }
    Napi::ThreadSafeFunction tsfn = reader_.Begin(env, info[0].As<Napi::Function>(), "knit:packet-taps");
    OpError err;
    if (PacketTaps::Create(
            [tsfn](std::vector<PacketEvent>&& events) mutable {
              auto* batch = new std::vector<PacketEvent>(std::move(events));
              if (tsfn.NonBlockingCall(batch, DeliverBatch) != napi_ok) delete batch;
            },
            &taps_, &err) < 0) {
      reader_.Abandon();
      MakeOpError(env, err).ThrowAsJavaScriptException();
      return;
    }
    reader_.Arm(env, [this] {
      taps_->Stop();
      taps_.reset();
    });
  }

  ~PacketTapsWrap() override { reader_.End(Env()); }

 private:
  bool Ready(Napi::Env env) {
    if (reader_.open()) return true;
    Napi::Error::New(env, "PacketTaps is shut down").ThrowAsJavaScriptException();
    return false;
  }

  Napi::Value Open(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    std::string ns, ifname;
    if (!ArgString(info, 0, "netnsPath", &ns) || !ArgString(info, 1, "ifname", &ifname) || !Ready(env)) return env.Undefined();
    int id = 0, ifindex = 0;
    OpError err;
    if (taps_->Open(ns, ifname, &id, &ifindex, &err) < 0) {
      MakeOpError(env, err).ThrowAsJavaScriptException();
      return env.Undefined();
    }
    Napi::Object o = Napi::Object::New(env);
    o.Set("id", id);
    o.Set("ifindex", ifindex);
    return o;
  }

  Napi::Value Send(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    int64_t id = 0;
    if (!ArgUint(info, 0, "id", INT32_MAX, &id) || !Ready(env)) return env.Undefined();
    if (info.Length() < 2 || !info[1].IsBuffer()) {
      Napi::TypeError::New(env, "frame must be a Buffer").ThrowAsJavaScriptException();
      return env.Undefined();
    }
    auto buf = info[1].As<Napi::Buffer<uint8_t>>();
    OpError err;
    if (taps_->Send(static_cast<int>(id), buf.Data(), buf.Length(), &err) < 0) MakeOpError(env, err).ThrowAsJavaScriptException();
    return env.Undefined();
  }

  Napi::Value Close(const Napi::CallbackInfo& info) {
    int64_t id = 0;
    if (!ArgUint(info, 0, "id", INT32_MAX, &id)) return info.Env().Undefined();
    if (reader_.open()) taps_->Close(static_cast<int>(id));
    return info.Env().Undefined();
  }
  Napi::Value ShutdownJs(const Napi::CallbackInfo& info) {
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

  std::unique_ptr<PacketTaps> taps_;
  JsReader reader_;
};

}  // namespace

void InitPacketTapsBindings(Napi::Env env, Napi::Object exports) { PacketTapsWrap::Init(env, exports); }

}  // namespace knit
