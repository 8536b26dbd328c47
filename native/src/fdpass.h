// Passing file descriptors over unix stream sockets (SCM_RIGHTS), which Node cannot do.
//
// Protocol shape knit uses (a "fd request"): the client connects, sends its request, and reads
// the reply until the server closes the connection; the fds ride on the reply's first byte.
// Request framing is the server's business (e.g. one JSON line).
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "errors.h"

namespace knit {

// The kernel's per-message cap on passed fds (SCM_MAX_FD).
constexpr size_t kMaxPassFds = 253;

// One sendmsg without blocking (MSG_DONTWAIT|MSG_NOSIGNAL). fds travel with the first byte
// sent, so len must be >= 1 when fds are given (a stream socket sends nothing for 0 bytes).
// Returns bytes sent (possibly fewer than len) or -errno (-EAGAIN: buffer full, nothing sent).
long SendFdsOnce(int sock, const char* data, size_t len, const std::vector<int>& fds);

// Sends all of data (fds with the first byte), waiting with poll() for room up to timeoutMs.
// For use off the JS thread. Returns 0 or -errno (-ETIMEDOUT), with err filled.
int SendFdsAll(int sock, const std::string& data, const std::vector<int>& fds, int timeoutMs, OpError* err);

// One recvmsg without blocking, taking at most maxBytes and maxFds (received fds are
// close-on-exec). Empty data with no error = the peer closed. If the peer sent more fds than
// maxFds the kernel drops the extra ones; then the received ones are closed too and -EMSGSIZE
// is returned, since the message is unusable.
int RecvFdsOnce(int sock, size_t maxBytes, size_t maxFds, std::string* data, std::vector<int>* fds,
                bool wait = false);

// Client side of a fd request, blocking up to timeoutMs in total: connect to socketPath,
// send request, read until EOF collecting data and fds (at most maxBytes / maxFds).
// On failure closes every fd received and returns -errno (-ETIMEDOUT on the deadline).
int RequestFds(const std::string& socketPath, const std::string& request, int timeoutMs, size_t maxBytes,
               size_t maxFds, std::string* data, std::vector<int>* fds, OpError* err);

}  // namespace knit
