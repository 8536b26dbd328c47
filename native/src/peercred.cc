#include "peercred.h"

#include <errno.h>
#include <napi.h>
#include <sys/socket.h>

#include <string>

#include "errors.h"
#include "nsfd_args.h"
#include "bindings.h"

namespace knit {

int GetPeerCred(int sock, PeerCred* out) {
  struct ucred cred = {};
  socklen_t len = sizeof(cred);
  if (getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) return -errno;
  out->pid = cred.pid;
  out->uid = cred.uid;
  out->gid = cred.gid;
  return 0;
}

namespace {

// peerCred(fd): {pid, uid, gid}
Napi::Value PeerCredJs(const Napi::CallbackInfo& info) {
  int64_t fd;
  if (!ArgUint(info, 0, "fd", INT32_MAX, &fd)) return info.Env().Undefined();
  PeerCred cred;
  int rc = GetPeerCred(static_cast<int>(fd), &cred);
  if (rc < 0) {
    OpError e;
    e.err = -rc;
    e.context = "read peer credentials (SO_PEERCRED) of fd " + std::to_string(fd);
    MakeOpError(info.Env(), e).ThrowAsJavaScriptException();
    return info.Env().Undefined();
  }
  Napi::Object o = Napi::Object::New(info.Env());
  o.Set("pid", Napi::Number::New(info.Env(), cred.pid));
  o.Set("uid", Napi::Number::New(info.Env(), cred.uid));
  o.Set("gid", Napi::Number::New(info.Env(), cred.gid));
  return o;
}

}  // namespace

void InitPeercredBindings(Napi::Env env, Napi::Object exports) {
  exports.Set("peerCred", Napi::Function::New(env, PeerCredJs, "peerCred"));
}

}  // namespace knit
