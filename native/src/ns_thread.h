// Work that must happen inside another network namespace.
//
// setns() moves only the calling thread. Doing it on the JS thread or on a libuv pool thread
// would leave that thread in the wrong namespace for whatever runs there next, so knit never
// does: a short-lived thread joins the namespace, does the one thing (open a netlink socket,
// open /dev/net/tun, write /proc/sys), hands back the result and exits.
#pragma once
#include <functional>

namespace knit {

// Runs fn on a fresh thread that has joined the network namespace open at nsfd (or stays in
// the caller's namespace when nsfd < 0). Returns fn's result, or -errno if setns failed.
// File descriptors fn opens stay valid and bound to that namespace after the thread exits.
int RunInNetns(int nsfd, const std::function<int()>& fn);

}  // namespace knit
