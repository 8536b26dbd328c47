#include "nl/fields.h"

#include <algorithm>
#include <cctype>
#include <cmath>

namespace knit::nl {

thread_local std::vector<std::string>* g_fieldReads = nullptr;

namespace {

std::string Describe(Napi::Value v) {
  if (v.IsUndefined()) return "undefined";
  if (v.IsNull()) return "null";
  if (v.IsArray()) return "array";
  switch (v.Type()) {
    case napi_string: return "string";
    case napi_number: return "number";
    case napi_boolean: return "boolean";
    case napi_object: return "object";
    case napi_function: return "function";
    case napi_bigint: return "bigint";
    default: return "value";
  }
}

}  // namespace

Fields::Fields(Napi::Value v, std::string path) : path_(std::move(path)) {
  if (!v.IsObject() || v.IsArray()) throw FieldError(FieldError::kType, path_ + ": expected object, got " + Describe(v));
  obj_ = v.As<Napi::Object>();
}

void Fields::TypeFail(const char* key, const std::string& what) const {
  throw FieldError(FieldError::kType, PathOf(key) + ": " + what);
}

void Fields::RangeFail(const char* key, const std::string& what) const {
  throw FieldError(FieldError::kRange, PathOf(key) + ": " + what);
}

bool Fields::Has(const char* key) const {
  Note(key);
  return !obj_.Get(key).IsUndefined();
}

bool Fields::IsNull(const char* key) const {
  Note(key);
  return obj_.Get(key).IsNull();
}

Fields Fields::Obj(const char* key) const {
  Note(key);
  return Fields(obj_.Get(key), PathOf(key));
}

std::string Fields::Str(const char* key) const {
  Note(key);
  Napi::Value v = obj_.Get(key);
  if (!v.IsString()) TypeFail(key, "expected string, got " + Describe(v));
  return v.As<Napi::String>().Utf8Value();
}

std::optional<std::string> Fields::OptStr(const char* key) const {
  if (!Has(key)) return std::nullopt;
  return Str(key);
}

uint32_t Fields::U32(const char* key, uint64_t min, uint64_t max) const {
  return static_cast<uint32_t>(U64(key, min, std::min<uint64_t>(max, UINT32_MAX)));
}

uint64_t Fields::U64(const char* key, uint64_t min, uint64_t max) const {
  Note(key);
  Napi::Value v = obj_.Get(key);
  if (!v.IsNumber()) TypeFail(key, "expected number, got " + Describe(v));
  double d = v.As<Napi::Number>().DoubleValue();
  if (!std::isfinite(d) || d != std::floor(d)) RangeFail(key, "expected an integer, got " + std::to_string(d));
  if (d < static_cast<double>(min) || d > static_cast<double>(max))
    RangeFail(key, "must be between " + std::to_string(min) + " and " + std::to_string(max) + ", got " + std::to_string(static_cast<long long>(d)));
  return static_cast<uint64_t>(d);
}

std::optional<uint32_t> Fields::OptU32(const char* key, uint64_t min, uint64_t max) const {
  if (!Has(key)) return std::nullopt;
  return U32(key, min, max);
}

std::optional<bool> Fields::OptBool(const char* key) const {
  if (!Has(key)) return std::nullopt;
  Napi::Value v = obj_.Get(key);
  if (!v.IsBoolean()) TypeFail(key, "expected boolean, got " + Describe(v));
  return v.As<Napi::Boolean>().Value();
}

std::optional<std::string> Fields::OptEnum(const char* key, std::initializer_list<const char*> allowed) const {
  if (!Has(key)) return std::nullopt;
  return Enum(key, allowed);
}

std::string Fields::Enum(const char* key, std::initializer_list<const char*> allowed) const {
  std::string s = Str(key);
  std::string list;
  for (const char* a : allowed) {
    if (s == a) return s;
    list += (list.empty() ? "" : ", ") + std::string("'") + a + "'";
  }
  RangeFail(key, "'" + s + "' is not one of " + list);
}

void CheckIfName(const std::string& name, const std::string& where) {
  if (name.empty()) throw FieldError(FieldError::kRange, where + ": interface name is empty");
  if (name.size() > 15)
    throw FieldError(FieldError::kRange, where + ": interface name '" + name + "' is " + std::to_string(name.size()) +
                                             " bytes; Linux allows at most 15");
  if (name == "." || name == "..") throw FieldError(FieldError::kRange, where + ": '" + name + "' is not a valid interface name");
  for (char c : name) {
    if (c == '/' || c == ':' || c == '\0' || std::isspace(static_cast<unsigned char>(c)))
      throw FieldError(FieldError::kRange, where + ": interface name '" + name + "' contains '/', ':', NUL or whitespace");
  }
}

std::string Fields::IfName(const char* key) const {
  std::string s = Str(key);
  CheckIfName(s, PathOf(key));
  return s;
}

std::optional<std::string> Fields::OptIfName(const char* key) const {
  if (!Has(key)) return std::nullopt;
  return IfName(key);
}

LinkRef Fields::Link(const char* key) const {
  Note(key);
  Napi::Value v = obj_.Get(key);
  LinkRef ref;
  if (v.IsString()) {
    ref.byName = true;
    ref.name = IfName(key);
    return ref;
  }
  if (v.IsNumber()) {
    ref.index = U32(key, 1, INT32_MAX);
    return ref;
  }
  TypeFail(key, "expected interface name (string) or ifindex (number), got " + Describe(v));
}

std::optional<LinkRef> Fields::OptLink(const char* key) const {
  if (!Has(key)) return std::nullopt;
  return Link(key);
}

}  // namespace knit::nl
