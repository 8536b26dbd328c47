#include "errors.h"

#include <string.h>

namespace knit {

std::string ErrnoName(int err) {
  const char* name = strerrorname_np(err);
  return name ? name : "E" + std::to_string(err);
}

Napi::Error MakeOpError(Napi::Env env, const OpError& e) {
  std::string msg = ErrnoName(e.err) + ": " + strerror(e.err);
  if (!e.extack.empty()) msg += " (" + e.extack + ")";
  if (!e.context.empty()) msg += " during " + e.context;
  Napi::Error error = Napi::Error::New(env, msg);
  error.Set("code", Napi::String::New(env, ErrnoName(e.err)));
  error.Set("errno", Napi::Number::New(env, e.err));
  if (e.index >= 0) error.Set("index", Napi::Number::New(env, e.index));
  if (!e.extack.empty()) error.Set("extack", Napi::String::New(env, e.extack));
  if (!e.context.empty()) error.Set("context", Napi::String::New(env, e.context));
  return error;
}

}  // namespace knit
