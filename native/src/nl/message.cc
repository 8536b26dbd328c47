#include "nl/message.h"

namespace knit::nl {

namespace {
constexpr size_t Align(size_t n) { return (n + 3) & ~size_t{3}; }
}  // namespace

Builder::Builder(uint16_t type, uint16_t flags) {
  nlmsghdr h{};
  h.nlmsg_len = NLMSG_HDRLEN;
  h.nlmsg_type = type;
  h.nlmsg_flags = flags;
  buf_.resize(NLMSG_HDRLEN);
  std::memcpy(buf_.data(), &h, sizeof h);
}

void Builder::Grow(size_t len) {
  buf_.resize(buf_.size() + Align(len), 0);
  uint32_t total = static_cast<uint32_t>(buf_.size());
  std::memcpy(buf_.data(), &total, 4);  // nlmsg_len is the first field
}

size_t Builder::Struct(const void* data, size_t len) {
  size_t off = buf_.size();
  Grow(len);
  if (len) std::memcpy(&buf_[off], data, len);
  return off;
}

size_t Builder::Attr(uint16_t type, const void* data, size_t len) {
  size_t off = buf_.size();
  Grow(NLA_HDRLEN + len);
  nlattr a{static_cast<uint16_t>(NLA_HDRLEN + len), type};
  std::memcpy(&buf_[off], &a, sizeof a);
  if (len) std::memcpy(&buf_[off + NLA_HDRLEN], data, len);
  return off + NLA_HDRLEN;
}

size_t Builder::Begin(uint16_t type) {
  size_t off = buf_.size();
  Attr(type, nullptr, 0);
  return off;
}

void Builder::End(size_t token) {
  uint16_t len = static_cast<uint16_t>(buf_.size() - token);
  std::memcpy(&buf_[token], &len, 2);
}

uint16_t Builder::Flags() const {
  uint16_t f;
  std::memcpy(&f, &buf_[offsetof(nlmsghdr, nlmsg_flags)], 2);
  return f;
}

uint16_t Builder::Type() const {
  uint16_t t;
  std::memcpy(&t, &buf_[offsetof(nlmsghdr, nlmsg_type)], 2);
  return t;
}

bool AttrIter::Next(Attr* out) {
  if (end_ - p_ < static_cast<ptrdiff_t>(NLA_HDRLEN)) return false;
  nlattr a;
  std::memcpy(&a, p_, sizeof a);
  if (a.nla_len < NLA_HDRLEN || a.nla_len > end_ - p_) return false;
  out->type = a.nla_type & NLA_TYPE_MASK;
  out->data = p_ + NLA_HDRLEN;
  out->len = a.nla_len - NLA_HDRLEN;
  size_t step = Align(a.nla_len);
  p_ = step > static_cast<size_t>(end_ - p_) ? end_ : p_ + step;
  return true;
}

AttrIter MessageAttrs(const nlmsghdr* msg, size_t hdr_len) {
  const uint8_t* base = reinterpret_cast<const uint8_t*>(msg);
  size_t start = NLMSG_HDRLEN + Align(hdr_len);
  if (msg->nlmsg_len < start) return AttrIter(base, 0);
  return AttrIter(base + start, msg->nlmsg_len - start);
}

bool FindAttr(const uint8_t* data, size_t len, uint16_t type, Attr* out) {
  AttrIter it(data, len);
  Attr a;
  while (it.Next(&a)) {
    if (a.type == type) {
      *out = a;
      return true;
    }
  }
  return false;
}

}  // namespace knit::nl
