// /proc/sys read-write in knit's own mount namespace. Container runtimes mount /proc/sys
// read-only in every unprivileged container (runc's readonlyPaths, the default of containerd and
// CRI-O), so knit run from its DaemonSet (NET_ADMIN and SYS_ADMIN, not privileged: README
// "Deploy on Kubernetes") could set none of the node's network sysctls (per-device forwarding,
// route_localnet, pods' conf). With SYS_ADMIN it may remount that bind mount read-write; the
// remount changes the container's mount namespace only, and grants nothing knit could not do
// already (with NET_ADMIN in the node's netns it is the node's network).
#include <errno.h>
#include <sys/mount.h>
#include <sys/statvfs.h>

#include <napi.h>

#include "bindings.h"
#include "errors.h"

namespace knit {
namespace {

// 0: already writable; 1: remounted read-write; -errno on failure (err says what).
int MakeProcSysWritable(OpError* err) {
  struct statvfs st;
  if (statvfs("/proc/sys", &st) < 0) {
    err->err = errno;
    err->context = "statvfs /proc/sys";
    return -errno;
  }
  if (!(st.f_flag & ST_RDONLY)) return 0;
  // A bind remount changes only this mount's flags; keep the ones the runtime set besides ro.
  unsigned long flags = MS_REMOUNT | MS_BIND;
  if (st.f_flag & ST_NOSUID) flags |= MS_NOSUID;
  if (st.f_flag & ST_NODEV) flags |= MS_NODEV;
  if (st.f_flag & ST_NOEXEC) flags |= MS_NOEXEC;
  if (mount(nullptr, "/proc/sys", nullptr, flags, nullptr) < 0) {
    err->err = errno;
    err->context = "remount /proc/sys read-write";
    return -errno;
  }
  return 1;
}

// procSysMakeWritable(): boolean — true when it remounted, false when /proc/sys was writable.
Napi::Value ProcSysMakeWritable(const Napi::CallbackInfo& info) {
  OpError err;
  int rc = MakeProcSysWritable(&err);
  if (rc < 0) {
    MakeOpError(info.Env(), err).ThrowAsJavaScriptException();
    return info.Env().Undefined();
  }
  return Napi::Boolean::New(info.Env(), rc == 1);
}

}  // namespace

void InitProcSysBindings(Napi::Env env, Napi::Object exports) {
  exports.Set("procSysMakeWritable", Napi::Function::New(env, ProcSysMakeWritable, "procSysMakeWritable"));
}

}  // namespace knit
