#include <napi.h>

#include "bindings.h"
#include "handle.h"
#include "ns_thread.h"

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  knit::InitNetnsHome();  // the JS thread's netns: where RunInNetns workers return to
  knit::InitNetnsBindings(env, exports);
  knit::InitFdpassBindings(env, exports);
  knit::InitPeercredBindings(env, exports);
  knit::InitMonitorBindings(env, exports);
  knit::InitDescribeBindings(env, exports);
  knit::InitSpawnBindings(env, exports);
  knit::InitPacketTapsBindings(env, exports);
  knit::InitProcSysBindings(env, exports);
  knit::InitNflogBindings(env, exports);
  knit::Handle::Init(env, exports);
  return exports;
}
NODE_API_MODULE(knit_native, Init)
