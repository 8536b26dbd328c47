// The addon's JS registrations, one per binding file; addon.cc calls each once at load.
#pragma once
#include <napi.h>

namespace knit {

void InitNetnsBindings(Napi::Env env, Napi::Object exports);     // netns_js.cc
void InitFdpassBindings(Napi::Env env, Napi::Object exports);    // fdpass_js.cc
void InitPeercredBindings(Napi::Env env, Napi::Object exports);  // peercred.cc
void InitMonitorBindings(Napi::Env env, Napi::Object exports);   // monitor_js.cc
void InitDescribeBindings(Napi::Env env, Napi::Object exports);  // nl/describe_js.cc
void InitSpawnBindings(Napi::Env env, Napi::Object exports);     // child_exec_js.cc
void InitPacketTapsBindings(Napi::Env env, Napi::Object exports);  // packet_taps_js.cc
void InitProcSysBindings(Napi::Env env, Napi::Object exports);     // proc_sys.cc
void InitNflogBindings(Napi::Env env, Napi::Object exports);       // nflog_js.cc

}  // namespace knit
