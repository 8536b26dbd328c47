// Reading op objects from JS with errors that name the field ("ops[2].peer.name: expected
// string"). Parsing throws FieldError; the Handle methods turn it into a JS TypeError or
// RangeError before anything reaches the kernel.
#pragma once
#include <napi.h>

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace knit::nl {

class FieldError : public std::runtime_error {
 public:
  enum Kind { kType, kRange };
  FieldError(Kind kind, const std::string& msg) : std::runtime_error(msg), kind(kind) {}
  Kind kind;
};

struct LinkRef {
  bool byName = false;
  std::string name;
  uint32_t index = 0;
};

// While set (describeOps, on the JS thread), every field a parser looks at is appended here:
// the schema agreement test compares these paths with the TypeScript op types.
extern thread_local std::vector<std::string>* g_fieldReads;

class Fields {
 public:
  Fields(Napi::Value v, std::string path);

  const std::string& Path() const { return path_; }
  std::string PathOf(const char* key) const { return path_ + "." + key; }
  bool Has(const char* key) const;   // present and not undefined
  bool IsNull(const char* key) const;
  Napi::Value Raw(const char* key) const {
    Note(key);
    return obj_.Get(key);
  }
  Fields Obj(const char* key) const;

  std::string Str(const char* key) const;
  std::optional<std::string> OptStr(const char* key) const;
  uint32_t U32(const char* key, uint64_t min = 0, uint64_t max = UINT32_MAX) const;
  std::optional<uint32_t> OptU32(const char* key, uint64_t min = 0, uint64_t max = UINT32_MAX) const;
  // A whole number JS can hold exactly (at most 2^53 - 1).
  uint64_t U64(const char* key, uint64_t min, uint64_t max) const;
  std::optional<bool> OptBool(const char* key) const;
  bool Bool(const char* key, bool dflt) const { return OptBool(key).value_or(dflt); }
  std::string Enum(const char* key, std::initializer_list<const char*> allowed) const;
  std::optional<std::string> OptEnum(const char* key, std::initializer_list<const char*> allowed) const;

  // An interface name: 1..15 bytes (IFNAMSIZ-1), no '/', ':' or whitespace, not "." or "..".
  std::string IfName(const char* key) const;
  std::optional<std::string> OptIfName(const char* key) const;
  // A link in the handle's netns: an interface name or a positive ifindex.
  LinkRef Link(const char* key) const;
  std::optional<LinkRef> OptLink(const char* key) const;

  [[noreturn]] void TypeFail(const char* key, const std::string& what) const;
  [[noreturn]] void RangeFail(const char* key, const std::string& what) const;

 private:
  void Note(const char* key) const {
    if (g_fieldReads) g_fieldReads->push_back(PathOf(key));
  }

  Napi::Object obj_;
  std::string path_;
};

// Validates an interface name found at `where`; throws FieldError(kRange).
void CheckIfName(const std::string& name, const std::string& where);

}  // namespace knit::nl
