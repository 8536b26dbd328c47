// Argument checks for the netns / fd / event bindings. A bad argument throws a TypeError that
// names the parameter, and the binding returns at once (exceptions are disabled).
#pragma once
#include <napi.h>

#include <cstdint>
#include <string>

namespace knit {

inline bool ArgString(const Napi::CallbackInfo& info, size_t i, const char* name, std::string* out) {
  if (info.Length() <= i || !info[i].IsString()) {
    Napi::TypeError::New(info.Env(), std::string(name) + " must be a string").ThrowAsJavaScriptException();
    return false;
  }
  *out = info[i].As<Napi::String>().Utf8Value();
  return true;
}

// A non-negative integer no larger than max (fds, counts, milliseconds).
inline bool ArgUint(const Napi::CallbackInfo& info, size_t i, const char* name, int64_t max, int64_t* out) {
  if (info.Length() > i && info[i].IsNumber()) {
    double v = info[i].As<Napi::Number>().DoubleValue();
    if (v >= 0 && v <= static_cast<double>(max) && v == static_cast<double>(static_cast<int64_t>(v))) {
      *out = static_cast<int64_t>(v);
      return true;
    }
  }
  Napi::TypeError::New(info.Env(), std::string(name) + " must be an integer from 0 to " + std::to_string(max))
      .ThrowAsJavaScriptException();
  return false;
}

inline bool ArgBool(const Napi::CallbackInfo& info, size_t i, bool fallback) {
  return info.Length() > i && info[i].IsBoolean() ? info[i].As<Napi::Boolean>().Value() : fallback;
}

}  // namespace knit
