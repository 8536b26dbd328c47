// sysctl reads/writes inside a netns (/proc/sys/net is per-namespace, bound at open time).
#pragma once
#include <string>

namespace knit {

// key uses dots ("net.ipv4.conf.eth0.arp_notify"); interface names with dots are not
// supported by this form, as with sysctl(8). Return 0 or -errno.
int SysctlWrite(int nsfd, const std::string& key, const std::string& value);
int SysctlRead(int nsfd, const std::string& key, std::string* value);

}  // namespace knit
