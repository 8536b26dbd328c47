// A NETLINK_ROUTE socket bound to one network namespace for its whole life.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace knit::nl {

using Message = std::vector<uint8_t>;

class Socket {
 public:
  Socket() = default;
  ~Socket() { Close(); }
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  // Opens the socket on a netns worker thread (ns_thread.h) inside the netns open at nsfd
  // (-1: ours), so the socket belongs to that netns; asks for extended acks and strict dump
  // filtering.
  // Returns 0 or -errno.
  int Open(int nsfd);
  void Close();
  bool IsOpen() const { return fd_ >= 0; }
  int Fd() const { return fd_; }

  // Sends req (its seq and pid are overwritten) and reads until the kernel's ACK, error or
  // NLMSG_DONE. Replies that carry data (dump parts, GET answers, echoes) go to *replies.
  // Returns 0 or -errno; on error *extack gets the kernel's message when it sent one.
  // A dump the kernel marks interrupted (NLM_F_DUMP_INTR) is retried.
  int Transact(Message req, std::vector<Message>* replies, std::string* extack);

 private:
  int TransactOnce(Message& req, std::vector<Message>* replies, std::string* extack, bool* interrupted);
  int Receive();

  int fd_ = -1;
  uint32_t seq_ = 0;
  std::vector<uint8_t> rx_;
  size_t rx_len_ = 0;
};

}  // namespace knit::nl
