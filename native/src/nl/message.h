// Building and reading netlink messages: a growable byte buffer with nested attributes on the
// way out, and a bounds-checked attribute walker on the way in.
#pragma once
#include <linux/netlink.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace knit::nl {

// One request under construction. The nlmsghdr comes first; the family header (ifinfomsg,
// rtmsg, ...) is appended with Struct(); attributes follow. Length fields are patched as the
// message grows, so Bytes() is always a complete message.
class Builder {
 public:
  Builder(uint16_t type, uint16_t flags);

  // Appends a fixed struct (family header or attribute payload), 4-byte aligned.
  // Returns its offset so callers can patch fields later (see Resolve in exec.h).
  size_t Struct(const void* data, size_t len);

  size_t Attr(uint16_t type, const void* data, size_t len);  // returns payload offset
  size_t U32(uint16_t type, uint32_t v) { return Attr(type, &v, 4); }
  void U16(uint16_t type, uint16_t v) { Attr(type, &v, 2); }
  void U8(uint16_t type, uint8_t v) { Attr(type, &v, 1); }
  void S32(uint16_t type, int32_t v) { Attr(type, &v, 4); }
  // NUL-terminated, as the kernel's NLA_STRING/NLA_NUL_STRING policies expect.
  void Str(uint16_t type, const std::string& s) { Attr(type, s.c_str(), s.size() + 1); }
  void Flag(uint16_t type) { Attr(type, nullptr, 0); }

  // Nested attribute: Begin returns a token for End, which fixes the nest's length.
  size_t Begin(uint16_t type);
  void End(size_t token);

  void SetU32At(size_t offset, uint32_t v) { std::memcpy(&buf_[offset], &v, 4); }
  uint16_t Flags() const;
  uint16_t Type() const;
  std::vector<uint8_t>& Bytes() { return buf_; }

 private:
  void Grow(size_t len);
  std::vector<uint8_t> buf_;
};

// A view of one attribute's payload.
struct Attr {
  uint16_t type = 0;  // without NLA_F_NESTED / NLA_F_NET_BYTEORDER
  const uint8_t* data = nullptr;
  size_t len = 0;

  uint8_t U8() const { return len >= 1 ? data[0] : 0; }
  uint16_t U16() const { uint16_t v = 0; if (len >= 2) std::memcpy(&v, data, 2); return v; }
  uint32_t U32() const { uint32_t v = 0; if (len >= 4) std::memcpy(&v, data, 4); return v; }
  int32_t S32() const { return static_cast<int32_t>(U32()); }
  // Strings may or may not carry their NUL; stop at the first one.
  std::string Str() const { return std::string(reinterpret_cast<const char*>(data), strnlen(reinterpret_cast<const char*>(data), len)); }
  template <typename T> bool As(T* out) const {
    if (len < sizeof(T)) return false;
    std::memcpy(out, data, sizeof(T));
    return true;
  }
};

// Walks a run of attributes. Stops (without error) at a malformed one.
class AttrIter {
 public:
  AttrIter(const uint8_t* data, size_t len) : p_(data), end_(data + len) {}
  explicit AttrIter(const Attr& nest) : AttrIter(nest.data, nest.len) {}
  bool Next(Attr* out);

 private:
  const uint8_t* p_;
  const uint8_t* end_;
};

// The attributes of a message with a family header of hdr_len bytes.
AttrIter MessageAttrs(const nlmsghdr* msg, size_t hdr_len);

// Finds the first attribute of a type in a run; returns false when absent.
bool FindAttr(const uint8_t* data, size_t len, uint16_t type, Attr* out);
inline bool FindAttr(const Attr& nest, uint16_t type, Attr* out) { return FindAttr(nest.data, nest.len, type, out); }

}  // namespace knit::nl
