#include "nl/inet.h"

#include <arpa/inet.h>

#include <cstdio>
#include <cstdlib>

namespace knit::nl {

bool ParseMac(const std::string& s, std::vector<uint8_t>* out) {
  unsigned b[6];
  char tail;
  if (s.size() != 17) return false;
  if (std::sscanf(s.c_str(), "%2x:%2x:%2x:%2x:%2x:%2x%c", &b[0], &b[1], &b[2], &b[3], &b[4], &b[5], &tail) != 6) return false;
  for (size_t i = 2; i < s.size(); i += 3)
    if (s[i] != ':') return false;
  out->assign(b, b + 6);
  return true;
}

std::string FormatMac(const uint8_t* data, size_t len) {
  std::string s;
  char part[4];
  for (size_t i = 0; i < len; i++) {
    std::snprintf(part, sizeof part, i ? ":%02x" : "%02x", data[i]);
    s += part;
  }
  return s;
}

bool ParseIp(const std::string& s, IpAddr* out) {
  if (inet_pton(AF_INET, s.c_str(), out->bytes) == 1) {
    out->family = AF_INET;
    return true;
  }
  if (inet_pton(AF_INET6, s.c_str(), out->bytes) == 1) {
    out->family = AF_INET6;
    return true;
  }
  return false;
}

bool ParseCidr(const std::string& s, Cidr* out) {
  size_t slash = s.find('/');
  if (!ParseIp(s.substr(0, slash), &out->addr)) return false;
  uint32_t max = out->addr.family == AF_INET ? 32 : 128;
  if (slash == std::string::npos) {
    out->prefix = max;
    return true;
  }
  std::string p = s.substr(slash + 1);
  if (p.empty() || p.size() > 3 || p.find_first_not_of("0123456789") != std::string::npos) return false;
  out->prefix = static_cast<uint32_t>(std::strtoul(p.c_str(), nullptr, 10));
  return out->prefix <= max;
}

std::string FormatIp(int family, const uint8_t* data) {
  char buf[INET6_ADDRSTRLEN];
  if (!inet_ntop(family, data, buf, sizeof buf)) return "";
  return buf;
}

}  // namespace knit::nl
