// spawnAndWait(path, env: string[], input: string, timeoutMs): Promise<{code, signal,
// timedOut, stdout, stderr, spawnError}>: child_exec.h on a short-lived thread, so neither the
// spawn nor the wait holds the event loop.
#include <napi.h>

#include <cstring>
#include <thread>

#include "bindings.h"
#include "child_exec.h"

namespace knit {
namespace {

Napi::Object ToJs(Napi::Env env, const SpawnResult& r) {
  Napi::Object o = Napi::Object::New(env);
  o.Set("code", r.termSignal || r.spawnErrno ? env.Null() : Napi::Number::New(env, r.exitCode));
  o.Set("signal", r.termSignal ? Napi::Value(Napi::String::New(env, strsignal(r.termSignal))) : env.Null());
  o.Set("timedOut", Napi::Boolean::New(env, r.timedOut));
  o.Set("stdout", Napi::String::New(env, r.out));
  o.Set("stderr", Napi::String::New(env, r.err));
  o.Set("spawnError", r.spawnErrno ? Napi::Value(Napi::String::New(env, strerror(r.spawnErrno))) : env.Null());
  return o;
}

struct Call {
  Napi::Promise::Deferred deferred;
  SpawnResult result;
};

Napi::Value SpawnAndWaitJs(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 4 || !info[0].IsString() || !info[1].IsArray() || !info[2].IsString() || !info[3].IsNumber()) {
    Napi::TypeError::New(env, "spawnAndWait(path: string, env: string[], input: string, timeoutMs: number)").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  Napi::Array arr = info[1].As<Napi::Array>();
  std::vector<std::string> vars;
  for (uint32_t i = 0; i < arr.Length(); i++) {
    Napi::Value v = arr.Get(i);
    if (!v.IsString()) {
      Napi::TypeError::New(env, "spawnAndWait: env entries must be strings").ThrowAsJavaScriptException();
      return env.Undefined();
    }
    vars.push_back(v.As<Napi::String>().Utf8Value());
  }
  std::string path = info[0].As<Napi::String>().Utf8Value();
  std::string input = info[2].As<Napi::String>().Utf8Value();
  int timeoutMs = info[3].As<Napi::Number>().Int32Value();
  auto* call = new Call{Napi::Promise::Deferred::New(env), {}};
  Napi::Promise promise = call->deferred.Promise();
  auto done = Napi::ThreadSafeFunction::New(env, Napi::Function(), "knit:spawnAndWait", 0, 1);
  // A thread of its own, not the libuv pool: a plugin may run for its whole deadline, and the
  // pool also carries the netlink batches of other attaches.
  std::thread([call, done, path = std::move(path), vars = std::move(vars), input = std::move(input), timeoutMs]() mutable {
    call->result = SpawnAndWait(path, vars, input, timeoutMs);
    done.BlockingCall(call, [](Napi::Env env, Napi::Function, Call* c) {
      c->deferred.Resolve(ToJs(env, c->result));
      delete c;
    });
    done.Release();
  }).detach();
  return promise;
}

}  // namespace

void InitSpawnBindings(Napi::Env env, Napi::Object exports) { exports.Set("spawnAndWait", Napi::Function::New(env, SpawnAndWaitJs)); }

}  // namespace knit
