#include <napi.h>

#include "handle.h"
#include "nsfd_init.h"

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  knit::InitNsFd(env, exports);
  knit::Handle::Init(env, exports);
  return exports;
}
NODE_API_MODULE(knit_native, Init)
