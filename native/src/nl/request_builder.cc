// RequestBuilder: the helpers every op family uses to lay out an rtnetlink request (links by
// index or by a name resolved just before sending, attributes, the subject link of the op).
#include "nl/families.h"

namespace knit::nl {

void RequestBuilder::LinkAt(size_t offset, const LinkRef& ref, const std::string& field, bool subject) {
  if (!ref.byName) {
    b.SetU32At(offset, ref.index);
    if (subject) subjectIndex_ = ref.index;
    return;
  }
  b.SetU32At(offset, 0);
  fixups_.push_back(Fixup{Fixup::kLink, offset, ref.name, field, subject});
}

void RequestBuilder::LinkAttr(uint16_t type, const LinkRef& ref, const std::string& field, bool subject) {
  size_t off = b.U32(type, 0);
  LinkAt(off, ref, field, subject);
}

void RequestBuilder::NetnsFdAttr(uint16_t type, const std::string& path, const std::string& field) {
  size_t off = b.U32(type, UINT32_MAX);
  fixups_.push_back(Fixup{Fixup::kNetns, off, path, field, false});
}

Request RequestBuilder::Done() {
  Request r;
  r.bytes = std::move(b.Bytes());
  r.fixups = std::move(fixups_);
  r.reply = reply_;
  r.echoName = echoName;
  r.subjectIndex = subjectIndex_;
  return r;
}

}  // namespace knit::nl
