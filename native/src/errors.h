// Kernel errors as JS errors. The addon reports facts (errno, which op of a batch, the
// kernel's extended-ack text); src/net/errors.ts turns them into the sentence a user reads.
#pragma once
#include <napi.h>

#include <string>

namespace knit {

struct OpError {
  int err = 0;            // positive errno
  int index = -1;         // position of the failing op in its batch, -1 when not a batch
  std::string extack;     // NLMSGERR_ATTR_MSG from the kernel, if it sent one
  std::string context;    // what the addon was doing, e.g. "open netns /run/netns/x"
};

// An Error with .code ("EEXIST"), .errno (17), .index, .extack, .context set.
Napi::Error MakeOpError(Napi::Env env, const OpError& e);

// Name of an errno value ("ENODEV"); "E<n>" when glibc has none.
std::string ErrnoName(int err);

}  // namespace knit
