// Text forms of MAC and IP addresses, both ways.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace knit::nl {

struct IpAddr {
  int family = 0;       // AF_INET or AF_INET6
  uint8_t bytes[16]{};
  size_t Len() const { return family == 10 /* AF_INET6 */ ? 16 : 4; }
};

struct Cidr {
  IpAddr addr;
  uint32_t prefix = 0;
};

// "aa:bb:cc:dd:ee:ff" → 6 bytes. Returns false on anything else.
bool ParseMac(const std::string& s, std::vector<uint8_t>* out);
std::string FormatMac(const uint8_t* data, size_t len);

bool ParseIp(const std::string& s, IpAddr* out);
// "10.0.0.2/24"; a bare address gets the full-length prefix. Returns false when malformed or
// the prefix is out of range.
bool ParseCidr(const std::string& s, Cidr* out);
std::string FormatIp(int family, const uint8_t* data);

}  // namespace knit::nl
