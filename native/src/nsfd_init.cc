#include "nsfd_init.h"

namespace knit {

void InitNsFd(Napi::Env env, Napi::Object exports) {
  InitNetnsBindings(env, exports);
  InitFdpassBindings(env, exports);
  InitPeercredBindings(env, exports);
  InitMonitorBindings(env, exports);
}

}  // namespace knit
