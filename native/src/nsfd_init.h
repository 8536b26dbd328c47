// JS registration of the netns / fd-passing / peer-credential / event-monitor bindings.
#pragma once
#include <napi.h>

namespace knit {

void InitNetnsBindings(Napi::Env env, Napi::Object exports);
void InitFdpassBindings(Napi::Env env, Napi::Object exports);
void InitPeercredBindings(Napi::Env env, Napi::Object exports);
void InitMonitorBindings(Napi::Env env, Napi::Object exports);

// Registers all of the above; called once from addon.cc.
void InitNsFd(Napi::Env env, Napi::Object exports);

}  // namespace knit
