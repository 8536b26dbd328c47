// C++ results → the plain JS objects src/net/ops.ts describes. JS thread only.
#pragma once
#include <napi.h>

#include <vector>

#include "nl/results.h"

namespace knit::nl {

Napi::Object ToJs(Napi::Env env, const OpResult& r);
Napi::Object ToJs(Napi::Env env, const LinkInfo& l);
Napi::Array ToJs(Napi::Env env, const std::vector<OpResult>& results);

}  // namespace knit::nl
