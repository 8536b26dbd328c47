// Work that must happen inside another network namespace.
//
// setns() moves only the calling thread. Doing it on the JS thread or on a libuv pool thread
// would leave that thread in the wrong namespace for whatever runs there next, so knit never
// does: a worker thread of its own joins the namespace, does the one thing (open a netlink
// socket, open /dev/net/tun, write /proc/sys), hands back the result and returns home.
//
// Starting and joining a thread per call was most of what opening a pod's socket cost (on the
// 2-core dev VM: ~100 µs of CPU per open+close that way, ~60 µs with a kept worker, and far
// more wall time when the new thread waits to be scheduled), so a few workers are kept.
// An idle worker always sits in the addon's home netns: a thread left in a pod's netns would
// hold a reference to it, and a deleted pod's namespace (with the veth ends in it) would live
// on. A worker that cannot get home exits instead (its exit drops the reference).
#pragma once
#include <functional>

namespace knit {

// Opens the home netns (that of the calling thread) once. addon.cc calls it at load, on the JS
// thread; later calls do nothing. Until it has run, workers are not kept (each exits after
// its call, as before).
void InitNetnsHome();

// Runs fn inside the network namespace open at nsfd, on a worker thread, and waits for it.
// nsfd < 0 runs fn on the calling thread (already in its own namespace: nothing to join).
// Returns fn's result, or -errno if setns failed (fn did not run).
// File descriptors fn opens stay valid and bound to that namespace afterwards.
int RunInNetns(int nsfd, const std::function<int()>& fn);

}  // namespace knit
