// Running prepared ops on a handle's socket: filling run-time slots (ifindex by name, netns
// fds), sending, reading replies into results. Safe on any thread that owns the socket.
#pragma once
#include <vector>

#include "errors.h"
#include "nl/op.h"

namespace knit::nl {

// Runs ops in order and stops at the first failure (err->index = its position); results
// holds one entry per op that completed, including skipped ones. Returns 0 or -errno.
int RunBatch(RunContext& ctx, std::vector<PreparedOp>& ops, std::vector<OpResult>* results, OpError* err);

// The bytes op would send (all its requests back to back) with seq and pid 0. Link names are
// looked up (read-only) so ifindex slots hold what a real run would put there; netns fds are
// opened to take a number, then closed. Non-netlink ops (tun, sysctl) have no bytes: -EINVAL.
int EncodeOp(RunContext& ctx, PreparedOp& op, std::vector<uint8_t>* out, OpError* err);

}  // namespace knit::nl
