// JS op objects → PreparedOp, on the JS thread. Throws FieldError naming the bad field.
#pragma once
#include <napi.h>

#include <string>
#include <vector>

#include "nl/op.h"

namespace knit::nl {

PreparedOp PrepareOp(Napi::Value value, const std::string& path);
std::vector<PreparedOp> PrepareOps(Napi::Value value, const std::string& path);

}  // namespace knit::nl
