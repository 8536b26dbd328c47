// Packet sockets on the guest side of VM taps, for knit's DHCP/RA responder (src/dhcp).
//
// Each socket is made inside the tap's netns (on a netns worker: a socket keeps the netns it
// was made in), bound to the tap's ifindex for every protocol, so it sees a guest's frame
// before a tc redirect or a bridge takes it, with a classic BPF filter that lets through only
// what a responder answers: UDP to port 67 (DHCPv4), UDP to 547 (DHCPv6), ICMPv6 router
// solicitations. Frames the daemon sends itself are not looped back (PACKET_IGNORE_OUTGOING).
// Each frame comes with whether its checksum is still the sender's NIC's to complete
// (PACKET_AUXDATA's TP_STATUS_CSUMNOTREADY): a virtio guest's kernel sockets leave it so.
// One reader thread (epoll) serves every socket, for the reasons monitor.h gives for its own
// thread, and so that a VM costs a socket, not a thread.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "errors.h"

namespace knit {

struct PacketEvent {
  int id = 0;
  int err = 0;               // a socket error (ENETDOWN: the tap went down or away); no frame
  std::vector<uint8_t> frame;
  size_t wireLength = 0;     // > frame.size() when the frame did not fit the read buffer
  bool partialChecksum = false;  // the transport checksum holds only the pseudo-header sum: the
                                 // guest left it to the NIC (TP_STATUS_CSUMNOTREADY)
  uint64_t overBudget = 0;   // frames read and discarded since the last event: the guest sent
                             // more than kFramesPerSecond (no frame in this event)
};

// What one guest may have answered: DHCP and RS are a handful of frames per boot, so a guest
// sending more is flooding, and its surplus is discarded here, before it costs the JS thread.
constexpr double kFramesPerSecond = 20;
constexpr double kFrameBurst = 40;

class PacketTaps {
 public:
  using Sink = std::function<void(std::vector<PacketEvent>&&)>;

  static int Create(Sink sink, std::unique_ptr<PacketTaps>* out, OpError* err);
  ~PacketTaps();

  // Opens a socket on ifname in the netns at nsPath; *id names it from then on.
  int Open(const std::string& nsPath, const std::string& ifname, int* id, int* ifindex, OpError* err);
  // Sends one whole frame out of the tap (towards the guest).
  int Send(int id, const uint8_t* data, size_t len, OpError* err);
  // Closes the socket. Events read before the close may still be on their way to the sink.
  void Close(int id);
  // Stops and joins the reader, closes every socket. Idempotent.
  void Stop();

 private:
  PacketTaps(int epfd, int wake, Sink sink) : epfd_(epfd), wake_(wake), sink_(std::move(sink)) {}
  void Run();

  int epfd_;
  int wake_;
  Sink sink_;
  std::mutex mu_;  // guards socks_ and every use of a socket fd (no fd is used after its close)
  struct Sock {
    int fd;
    double tokens = kFrameBurst;
    int64_t refilledNs = 0;
    uint64_t discarded = 0;
  };
  std::unordered_map<int, Sock> socks_;  // id -> its socket
  int nextId_ = 1;
  std::atomic<bool> stopping_{false};
  std::thread reader_;
};

}  // namespace knit
