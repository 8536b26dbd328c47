// describeOps(ops): for each op, the field paths the addon's parser reads from it ("peer.name"),
// without running anything. test/unit/op-schema.test.ts sends a full sample of every op type
// of src/base/ops.ts and checks that the addon reads every field TypeScript declares and none
// that it does not, so the two descriptions of the op schema cannot drift apart.
#include <napi.h>

#include <string>
#include <vector>

#include "bindings.h"
#include "nl/fields.h"
#include "nl/prepare.h"

namespace knit {

namespace {

Napi::Value DescribeOps(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!info[0].IsArray()) {
    Napi::TypeError::New(env, "ops: expected an array of ops").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  Napi::Array ops = info[0].As<Napi::Array>();
  Napi::Array out = Napi::Array::New(env, ops.Length());
  for (uint32_t i = 0; i < ops.Length(); i++) {
    std::vector<std::string> reads;
    nl::g_fieldReads = &reads;
    try {
      nl::PrepareOp(ops.Get(i), "op");
    } catch (const nl::FieldError& e) {
      nl::g_fieldReads = nullptr;
      Napi::TypeError::New(env, "ops[" + std::to_string(i) + "]: " + e.what()).ThrowAsJavaScriptException();
      return env.Undefined();
    }
    nl::g_fieldReads = nullptr;
    Napi::Array paths = Napi::Array::New(env, reads.size());
    for (size_t j = 0; j < reads.size(); j++) paths.Set(j, reads[j].substr(3));  // drop "op."
    out.Set(i, paths);
  }
  return out;
}

}  // namespace

void InitDescribeBindings(Napi::Env env, Napi::Object exports) {
  exports.Set("describeOps", Napi::Function::New(env, DescribeOps, "describeOps"));
}

}  // namespace knit
