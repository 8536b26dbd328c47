#include "handle.h"

#include <errno.h>
#include <unistd.h>

#include "errors.h"
#include "netns.h"
#include "nl/exec.h"
#include "nl/families.h"
#include "nl/fields.h"
#include "nl/prepare.h"
#include "nl/to_js.h"

namespace knit {

namespace {

// Throws the FieldError as a JS TypeError/RangeError; returns an empty value to return.
Napi::Value ThrowField(Napi::Env env, const nl::FieldError& e) {
  if (e.kind == nl::FieldError::kType) Napi::TypeError::New(env, e.what()).ThrowAsJavaScriptException();
  else Napi::RangeError::New(env, e.what()).ThrowAsJavaScriptException();
  return env.Undefined();
}

// A batch on a closed handle fails at its first op (none took effect).
Napi::Error BatchError(Napi::Env env, const OpError& err, const std::vector<nl::OpResult>& completed) {
  Napi::Error e = MakeOpError(env, err);
  e.Set("completed", nl::ToJs(env, completed));
  return e;
}

// Opens *socket in the netns at path (empty: ours), leaving that netns open at *nsfd (-1 for
// ours; ops such as tun.add need it). On failure nothing stays open and *err says which step.
int OpenSocket(const std::string& path, nl::Socket* socket, int* nsfd, OpError* err) {
  *nsfd = -1;
  if (!path.empty()) {
    int fd = OpenNetns(path, err);
    if (fd < 0) {
      err->err = -fd;
      if (err->context.empty()) err->context = "open netns " + path;
      return fd;
    }
    *nsfd = fd;
  }
  int rc = socket->Open(*nsfd);
  if (rc < 0) {
    if (*nsfd >= 0) close(*nsfd);
    *nsfd = -1;
    err->err = -rc;
    err->context = "open netlink socket in netns " + (path.empty() ? std::string("(own)") : path);
  }
  return rc;
}

class RunWorker : public Napi::AsyncWorker {
 public:
  RunWorker(Napi::Object self, Handle* handle, std::vector<nl::PreparedOp> ops)
      : Napi::AsyncWorker(self.Env(), "knit.netlink.run"),
        self_(Napi::Persistent(self)),
        handle_(handle),
        ops_(std::move(ops)),
        deferred_(Napi::Promise::Deferred::New(self.Env())) {}

  Napi::Promise Promise() { return deferred_.Promise(); }

  void Execute() override {
    rc_ = handle_->WithContext(&err_, [&](nl::RunContext& ctx) { return nl::RunBatch(ctx, ops_, &results_, &err_); });
  }

  void OnOK() override {
    Napi::Env env = Env();
    if (rc_ < 0) deferred_.Reject(BatchError(env, err_, results_).Value());
    else deferred_.Resolve(nl::ToJs(env, results_));
  }

 private:
  Napi::ObjectReference self_;  // keeps the handle (and its socket) alive while we run
  Handle* handle_;
  std::vector<nl::PreparedOp> ops_;
  Napi::Promise::Deferred deferred_;
  std::vector<nl::OpResult> results_;
  OpError err_;
  int rc_ = 0;
};

// Handle.runIn: one batch in another netns with no handle for JS to hold. The netns file,
// the socket and the batch all happen here on the pool thread, and both are closed before
// the promise settles, so nothing of the netns outlives the batch.
class RunInWorker : public Napi::AsyncWorker {
 public:
  RunInWorker(Napi::Env env, std::string netns, std::vector<nl::PreparedOp> ops)
      : Napi::AsyncWorker(env, "knit.netlink.runIn"),
        netns_(std::move(netns)),
        ops_(std::move(ops)),
        deferred_(Napi::Promise::Deferred::New(env)) {}

  Napi::Promise Promise() { return deferred_.Promise(); }

  void Execute() override {
    nl::Socket socket;
    int nsfd = -1;
    rc_ = OpenSocket(netns_, &socket, &nsfd, &err_);
    if (rc_ < 0) return;
    nl::RunContext ctx{&socket, nsfd};
    rc_ = nl::RunBatch(ctx, ops_, &results_, &err_);
    socket.Close();
    if (nsfd >= 0) close(nsfd);
  }

  void OnOK() override {
    Napi::Env env = Env();
    if (rc_ < 0) deferred_.Reject(BatchError(env, err_, results_).Value());
    else deferred_.Resolve(nl::ToJs(env, results_));
  }

 private:
  std::string netns_;
  std::vector<nl::PreparedOp> ops_;
  Napi::Promise::Deferred deferred_;
  std::vector<nl::OpResult> results_;
  OpError err_;
  int rc_ = 0;
};

}  // namespace

void Handle::Init(Napi::Env env, Napi::Object exports) {
  Napi::Function cls = DefineClass(env, "Handle",
                                   {
                                       InstanceMethod<&Handle::Run>("run"),
                                       InstanceMethod<&Handle::RunSync>("runSync"),
                                       InstanceMethod<&Handle::Encode>("encode"),
                                       InstanceMethod<&Handle::Close>("close"),
                                       InstanceAccessor<&Handle::GetNetns>("netns"),
                                       InstanceAccessor<&Handle::GetClosed>("closed"),
                                       StaticMethod<&Handle::DecodeLink>("decodeLink"),
                                       StaticMethod<&Handle::RunIn>("runIn"),
                                   });
  exports.Set("Handle", cls);
}

Handle::Handle(const Napi::CallbackInfo& info) : Napi::ObjectWrap<Handle>(info) {
  Napi::Env env = info.Env();
  if (info.Length() > 0 && !info[0].IsUndefined() && !info[0].IsNull()) {
    if (!info[0].IsString()) {
      Napi::TypeError::New(env, "netnsPath: expected string").ThrowAsJavaScriptException();
      return;
    }
    netns_ = info[0].As<Napi::String>().Utf8Value();
  }
  OpError err;
  if (OpenSocket(netns_, &socket_, &nsfd_, &err) < 0) MakeOpError(env, err).ThrowAsJavaScriptException();
}

Handle::~Handle() { CloseNow(); }

void Handle::CloseNow() {
  std::lock_guard<std::mutex> lock(mu_);
  socket_.Close();
  if (nsfd_ >= 0) close(nsfd_);
  nsfd_ = -1;
}

Napi::Value Handle::Run(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  std::vector<nl::PreparedOp> ops;
  try {
    ops = nl::PrepareOps(info[0], "ops");
  } catch (const nl::FieldError& e) {
    return ThrowField(env, e);
  }
  auto* worker = new RunWorker(info.This().As<Napi::Object>(), this, std::move(ops));
  Napi::Promise p = worker->Promise();
  worker->Queue();
  return p;
}

Napi::Value Handle::RunIn(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsString()) {
    Napi::TypeError::New(env, "netnsPath: expected string").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  std::vector<nl::PreparedOp> ops;
  try {
    ops = nl::PrepareOps(info[1], "ops");
  } catch (const nl::FieldError& e) {
    return ThrowField(env, e);
  }
  auto* worker = new RunInWorker(env, info[0].As<Napi::String>().Utf8Value(), std::move(ops));
  Napi::Promise p = worker->Promise();
  worker->Queue();
  return p;
}

Napi::Value Handle::RunSync(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  std::vector<nl::PreparedOp> ops;
  try {
    ops = nl::PrepareOps(info[0], "ops");
  } catch (const nl::FieldError& e) {
    return ThrowField(env, e);
  }
  std::vector<nl::OpResult> results;
  OpError err;
  int rc = WithContext(&err, [&](nl::RunContext& ctx) { return nl::RunBatch(ctx, ops, &results, &err); });
  if (rc < 0) {
    BatchError(env, err, results).ThrowAsJavaScriptException();
    return env.Undefined();
  }
  return nl::ToJs(env, results);
}

Napi::Value Handle::Encode(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  nl::PreparedOp op;
  try {
    op = nl::PrepareOp(info[0], "op");
  } catch (const nl::FieldError& e) {
    return ThrowField(env, e);
  }
  std::vector<uint8_t> bytes;
  OpError err;
  int rc = WithContext(&err, [&](nl::RunContext& ctx) { return nl::EncodeOp(ctx, op, &bytes, &err); });
  if (rc < 0) {
    MakeOpError(env, err).ThrowAsJavaScriptException();
    return env.Undefined();
  }
  return Napi::Buffer<uint8_t>::Copy(env, bytes.data(), bytes.size());
}

Napi::Value Handle::Close(const Napi::CallbackInfo& info) {
  CloseNow();
  return info.Env().Undefined();
}

Napi::Value Handle::GetNetns(const Napi::CallbackInfo& info) {
  if (netns_.empty()) return info.Env().Undefined();
  return Napi::String::New(info.Env(), netns_);
}

Napi::Value Handle::GetClosed(const Napi::CallbackInfo& info) { return Napi::Boolean::New(info.Env(), !socket_.IsOpen()); }

Napi::Value Handle::DecodeLink(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!info[0].IsBuffer()) {
    Napi::TypeError::New(env, "decodeLink: expected Buffer").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  auto buf = info[0].As<Napi::Buffer<uint8_t>>();
  nl::Message m(buf.Data(), buf.Data() + buf.Length());
  nl::LinkInfo link;
  if (m.size() < NLMSG_HDRLEN || reinterpret_cast<const nlmsghdr*>(m.data())->nlmsg_len > m.size() || !nl::ParseLink(m, &link)) {
    Napi::TypeError::New(env, "decodeLink: not an RTM_NEWLINK message").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  return nl::ToJs(env, link);
}

}  // namespace knit
