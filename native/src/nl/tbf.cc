// The token bucket filter (sch_tbf) as a device's root qdisc: what knit shapes a pod's traffic
// with (README "Bandwidth"). The rate is given in bytes per second with rate.linklayer set to
// ethernet, so the kernel computes packet times itself and no rate table is sent; the burst
// goes as TCA_TBF_BURST in bytes (the kernel turns it into its bucket time), and the limit is
// the byte size of the queue that waits for tokens (include/uapi/linux/pkt_sched.h,
// net/sched/sch_tbf.c tbf_change).
#include <errno.h>
#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>
#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "nl/families.h"

namespace knit::nl {

namespace {

constexpr uint32_t kTbfHandle = 0x00010000;  // "1:", the handle knit gives its root tbf
constexpr uint64_t kMaxRate = (1ull << 53) - 1;  // what a JS number holds exactly

}  // namespace

PreparedOp PrepareTbf(const Fields& f, bool add) {
  LinkRef link = f.Link("link");
  RequestBuilder r(add ? RTM_NEWQDISC : RTM_DELQDISC, NLM_F_REQUEST | NLM_F_ACK | (add ? NLM_F_CREATE | NLM_F_EXCL : 0));
  tcmsg t{};
  t.tcm_family = AF_UNSPEC;
  t.tcm_handle = kTbfHandle;
  t.tcm_parent = TC_H_ROOT;
  size_t hdr = r.b.Struct(&t, sizeof t);
  r.LinkAt(hdr + offsetof(tcmsg, tcm_ifindex), link, f.PathOf("link"), true);
  // On delete the kind is checked too: a root qdisc of another kind is not knit's to remove.
  r.b.Str(TCA_KIND, "tbf");
  PreparedOp op;
  op.name = add ? "qdisc.add" : "qdisc.del";
  if (add) {
    uint64_t rate = f.U64("rate", 1, kMaxRate);
    uint32_t burst = f.U32("burst", 1, UINT32_MAX);
    uint32_t limit = f.U32("limit", 1, UINT32_MAX);
    tc_tbf_qopt q{};
    // The u32 field saturates; a rate of 4 GB/s or more travels in TCA_TBF_RATE64.
    q.rate.rate = rate > UINT32_MAX ? UINT32_MAX : static_cast<uint32_t>(rate);
    q.rate.linklayer = TC_LINKLAYER_ETHERNET;
    q.limit = limit;
    size_t options = r.b.Begin(TCA_OPTIONS);
    r.b.Attr(TCA_TBF_PARMS, &q, sizeof q);
    if (rate > UINT32_MAX) r.b.Attr(TCA_TBF_RATE64, &rate, sizeof rate);
    r.b.U32(TCA_TBF_BURST, burst);
    r.b.End(options);
  } else {
    op.ignoreMissing = f.Bool("ignoreMissing", false);
    // No such qdisc: ENOENT (the default root has handle 0) or EINVAL (another kind or handle).
    op.missingErrnos = {ENOENT, EINVAL, ENODEV};
  }
  op.requests.push_back(r.Done());
  return op;
}

void ParseTbfOptions(const Attr& options, QdiscInfo* out) {
  Attr parms, rate64;
  tc_tbf_qopt q;
  if (!FindAttr(options, TCA_TBF_PARMS, &parms) || !parms.As(&q)) return;
  uint64_t rate = q.rate.rate;
  if (FindAttr(options, TCA_TBF_RATE64, &rate64) && rate64.len >= sizeof rate) std::memcpy(&rate, rate64.data, sizeof rate);
  out->rate = rate;
  out->limit = q.limit;
}

}  // namespace knit::nl
