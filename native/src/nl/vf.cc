// SR-IOV VF settings on the PF: IFLA_VFINFO_LIST inside RTM_NEWLINK, attribute for attribute
// in the order `ip link set PF vf N ...` (iproute2) sends them, and its parsing in link dumps.
#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <netinet/in.h>

#include "nl/families.h"
#include "nl/inet.h"

namespace knit::nl {

namespace {

constexpr uint16_t kEthP8021AD = 0x88A8;

uint32_t LinkStateValue(const std::string& s) {
  if (s == "enable") return IFLA_VF_LINK_STATE_ENABLE;
  if (s == "disable") return IFLA_VF_LINK_STATE_DISABLE;
  return IFLA_VF_LINK_STATE_AUTO;
}

}  // namespace

PreparedOp PrepareVfSet(const Fields& f) {
  LinkRef link = f.Link("link");
  const uint32_t vf = f.U32("vf", 0, INT32_MAX);
  RequestBuilder r(RTM_NEWLINK, NLM_F_REQUEST | NLM_F_ACK);
  ifinfomsg ifi{};
  size_t hdr = r.b.Struct(&ifi, sizeof ifi);
  r.LinkAt(hdr + offsetof(ifinfomsg, ifi_index), link, f.PathOf("link"), true);

  size_t list = r.b.Begin(IFLA_VFINFO_LIST);
  size_t info = r.b.Begin(IFLA_VF_INFO);
  if (f.Has("mac")) {
    std::vector<uint8_t> mac;
    if (!ParseMac(f.Str("mac"), &mac)) f.RangeFail("mac", "'" + f.Str("mac") + "' is not a MAC address");
    ifla_vf_mac m{};
    m.vf = vf;
    std::memcpy(m.mac, mac.data(), mac.size());
    r.b.Attr(IFLA_VF_MAC, &m, sizeof m);
  }
  auto vlan = f.OptU32("vlan", 0, 4095);
  auto qos = f.OptU32("qos", 0, 7);
  auto proto = f.OptEnum("vlanProto", {"802.1Q", "802.1ad"});
  if ((qos || proto) && !vlan) f.TypeFail("vlan", "expected number (qos and vlanProto need a vlan), got undefined");
  if (vlan && proto == "802.1ad") {
    // Only 802.1ad needs the list form (which carries the protocol); 802.1Q is the plain
    // IFLA_VF_VLAN, exactly as iproute2 chooses.
    size_t vlist = r.b.Begin(IFLA_VF_VLAN_LIST);
    ifla_vf_vlan_info v{};
    v.vf = vf;
    v.vlan = *vlan;
    v.qos = qos.value_or(0);
    v.vlan_proto = htons(kEthP8021AD);
    r.b.Attr(IFLA_VF_VLAN_INFO, &v, sizeof v);
    r.b.End(vlist);
  } else if (vlan) {
    ifla_vf_vlan v{vf, *vlan, qos.value_or(0)};
    r.b.Attr(IFLA_VF_VLAN, &v, sizeof v);
  }
  if (auto spoof = f.OptBool("spoofchk")) {
    ifla_vf_spoofchk s{vf, *spoof ? 1u : 0u};
    r.b.Attr(IFLA_VF_SPOOFCHK, &s, sizeof s);
  }
  if (auto trust = f.OptBool("trust")) {
    ifla_vf_trust t{vf, *trust ? 1u : 0u};
    r.b.Attr(IFLA_VF_TRUST, &t, sizeof t);
  }
  if (auto state = f.OptEnum("linkState", {"auto", "enable", "disable"})) {
    ifla_vf_link_state s{vf, LinkStateValue(*state)};
    r.b.Attr(IFLA_VF_LINK_STATE, &s, sizeof s);
  }
  auto minRate = f.OptU32("minTxRate");
  auto maxRate = f.OptU32("maxTxRate");
  if (minRate || maxRate) {
    // Both limits travel together; a missing one is sent as 0 (no limit). iproute2 instead
    // reads the current value first; knit always states both.
    ifla_vf_rate rate{vf, minRate.value_or(0), maxRate.value_or(0)};
    if (rate.max_tx_rate && rate.min_tx_rate > rate.max_tx_rate) f.RangeFail("minTxRate", "must not exceed maxTxRate");
    r.b.Attr(IFLA_VF_RATE, &rate, sizeof rate);
  }
  r.b.End(info);
  r.b.End(list);
  PreparedOp op;
  op.name = "vf.set";
  op.requests.push_back(r.Done());
  return op;
}

void ParseVfList(const Attr& list, std::vector<VfInfo>* out) {
  AttrIter infos(list);
  Attr info;
  while (infos.Next(&info)) {
    if (info.type != IFLA_VF_INFO) continue;
    VfInfo vf;
    AttrIter it(info);
    Attr a;
    while (it.Next(&a)) {
      switch (a.type) {
        case IFLA_VF_MAC: {
          ifla_vf_mac m;
          if (a.As(&m)) { vf.vf = m.vf; vf.mac = FormatMac(m.mac, 6); }
          break;
        }
        case IFLA_VF_VLAN: {
          ifla_vf_vlan v;
          if (a.As(&v)) { vf.vlan = v.vlan; vf.qos = v.qos; }
          break;
        }
        case IFLA_VF_VLAN_LIST: {
          Attr first;
          ifla_vf_vlan_info v;
          if (FindAttr(a, IFLA_VF_VLAN_INFO, &first) && first.As(&v)) {
            vf.vlan = v.vlan;
            vf.qos = v.qos;
            vf.vlanProto = ntohs(v.vlan_proto) == kEthP8021AD ? "802.1ad" : "802.1Q";
          }
          break;
        }
        case IFLA_VF_SPOOFCHK: {
          ifla_vf_spoofchk s;
          if (a.As(&s) && s.setting != UINT32_MAX) vf.spoofchk = s.setting != 0;  // ~0: unsupported
          break;
        }
        case IFLA_VF_TRUST: {
          ifla_vf_trust t;
          if (a.As(&t) && t.setting != UINT32_MAX) vf.trust = t.setting != 0;
          break;
        }
        case IFLA_VF_RATE: {
          ifla_vf_rate rate;
          if (a.As(&rate)) { vf.minTxRate = rate.min_tx_rate; vf.maxTxRate = rate.max_tx_rate; }
          break;
        }
        case IFLA_VF_LINK_STATE: {
          ifla_vf_link_state s;
          if (a.As(&s))
            vf.linkState = s.link_state == IFLA_VF_LINK_STATE_ENABLE ? "enable" : s.link_state == IFLA_VF_LINK_STATE_DISABLE ? "disable" : "auto";
          break;
        }
        default: break;
      }
    }
    out->push_back(std::move(vf));
  }
}

}  // namespace knit::nl
