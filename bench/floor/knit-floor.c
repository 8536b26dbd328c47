// knit-floor: the kernel floor for "attach a fresh netns to a bridge", with no daemon.
//
// The same kernel work every contender does, as raw rtnetlink and nothing else:
//   host netns : one RTM_NEWLINK creating the veth pair, host end on the bridge (IFLA_MASTER)
//                and up, the peer created directly inside the sandbox netns (IFLA_NET_NS_FD), up
//   sandbox    : a netlink socket opened inside the netns by a short-lived thread (setns there,
//                never on the main thread, as knit's design requires), then RTM_GETLINK by name,
//                RTM_NEWLINK up (the kernel refuses IFF_UP on a peer created in another netns),
//                RTM_NEWADDR, RTM_NEWROUTE default via the gateway
//   detach     : one RTM_DELLINK of the host end (the peer goes with it)
//   VM flavor  : the same, plus what a Kata tcfilter attach adds inside the netns: a persistent
//                tap (TUNSETIFF + TUNSETPERSIST on a /dev/net/tun opened there), the tap up, an
//                ingress qdisc on the peer and on the tap, and a u32 match-all filter with a
//                mirred egress redirect each way; its detach deletes the tap, then the veth
// One message per round trip, each acknowledged: batching would save syscalls, not kernel work.
//
// Modes:
//   knit-floor --bridge BR --serve
//       long-lived; reads commands on stdin, one per line, answers one line each:
//         attach <netns-path> <host-name> <peer-name> <addr>/<plen> <gateway>
//         detach <host-name>
//         attach-vm <netns-path> <host-name> <peer-name> <addr>/<plen> <gateway> <tap-name>
//         detach-vm <netns-path> <host-name> <tap-name>
//       answer: "ok <nanoseconds spent inside this process>" or "err <what failed>: <strerror>"
//   knit-floor --bridge BR --netns PATH --addr A/P --gw G [--host NAME] --count N
//       N attach/detach cycles in one netns, then a summary line; process start-up is paid once.
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if_ether.h>
#include <linux/if_link.h>
#include <linux/if_tun.h>
#include <linux/netlink.h>
#include <linux/pkt_cls.h>
#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>
#include <linux/tc_act/tc_mirred.h>
#include <linux/veth.h>
#include <net/if.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

// ---------------------------------------------------------------------------------------------
// Message building

typedef struct {
  union {
    struct nlmsghdr h;
    char buf[2048];
  };
} msg_t;

static uint32_t seq_counter;

static void msg_init(msg_t *m, uint16_t type, uint16_t flags) {
  memset(m, 0, sizeof(*m));
  m->h.nlmsg_len = NLMSG_LENGTH(0);
  m->h.nlmsg_type = type;
  m->h.nlmsg_flags = NLM_F_REQUEST | flags;
  m->h.nlmsg_seq = ++seq_counter;
}

static void *msg_tail(msg_t *m) { return m->buf + NLMSG_ALIGN(m->h.nlmsg_len); }

// Appends a fixed header (ifinfomsg, ifaddrmsg, rtmsg) or any aligned blob.
static void *msg_put(msg_t *m, size_t len) {
  void *p = msg_tail(m);
  memset(p, 0, NLMSG_ALIGN(len));
  m->h.nlmsg_len = NLMSG_ALIGN(m->h.nlmsg_len) + NLMSG_ALIGN(len);
  return p;
}

static struct rtattr *attr_put(msg_t *m, unsigned short type, const void *data, size_t len) {
  struct rtattr *a = msg_tail(m);
  a->rta_type = type;
  a->rta_len = RTA_LENGTH(len);
  if (len) memcpy(RTA_DATA(a), data, len);
  m->h.nlmsg_len = NLMSG_ALIGN(m->h.nlmsg_len) + RTA_ALIGN(a->rta_len);
  return a;
}

static struct rtattr *nest_begin(msg_t *m, unsigned short type) { return attr_put(m, type, NULL, 0); }
static void nest_end(msg_t *m, struct rtattr *a) { a->rta_len = (char *)msg_tail(m) - (char *)a; }

// ---------------------------------------------------------------------------------------------
// Sockets

static int nl_open(void) {
  int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
  if (fd < 0) return -errno;
  struct sockaddr_nl sa = {.nl_family = AF_NETLINK};
  if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
    int e = errno;
    close(fd);
    return -e;
  }
  return fd;
}

// Sends one request and reads until its answer: an NLMSG_ERROR (0 = ack) or, for a GET, the
// object itself, copied to reply. Returns 0 or -errno.
static int nl_call(int fd, msg_t *m, msg_t *reply) {
  if (send(fd, m->buf, m->h.nlmsg_len, 0) < 0) return -errno;
  char buf[8192];
  for (;;) {
    ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return -errno;
    }
    for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK(h, (size_t)n); h = NLMSG_NEXT(h, n)) {
      if (h->nlmsg_seq != m->h.nlmsg_seq) continue;
      if (h->nlmsg_type == NLMSG_ERROR) return ((struct nlmsgerr *)NLMSG_DATA(h))->error;
      if (reply && h->nlmsg_len <= sizeof(reply->buf)) {
        memcpy(reply->buf, h, h->nlmsg_len);
        return 0;
      }
    }
  }
}

// setns() moves only the calling thread, so a throwaway thread enters the netns and opens the
// socket there; the socket stays bound to that netns after the thread exits.
// A tun device is made in the netns its /dev/net/tun fd was opened in, so the same thread
// opens that too when asked (tun_fd != NULL).
typedef struct {
  int ns_fd;
  int result;
  int *tun_fd;
} ns_open_t;

static void *ns_open_thread(void *arg) {
  ns_open_t *o = arg;
  if (setns(o->ns_fd, CLONE_NEWNET) < 0) {
    o->result = -errno;
    return NULL;
  }
  o->result = nl_open();
  if (o->result >= 0 && o->tun_fd) {
    *o->tun_fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC);
    if (*o->tun_fd < 0) {
      int e = errno;
      close(o->result);
      o->result = -e;
    }
  }
  return NULL;
}

static int nl_open_in_with_tun(int ns_fd, int *tun_fd) {
  ns_open_t o = {.ns_fd = ns_fd, .result = -EINVAL, .tun_fd = tun_fd};
  pthread_t t;
  int e = pthread_create(&t, NULL, ns_open_thread, &o);
  if (e) return -e;
  pthread_join(t, NULL);
  return o.result;
}

static int nl_open_in(int ns_fd) { return nl_open_in_with_tun(ns_fd, NULL); }

// ---------------------------------------------------------------------------------------------
// The work

static int host_nl = -1;
static int bridge_index;
static char failed_step[128];

#define STEP(name, expr)                                \
  do {                                                  \
    int rc_ = (expr);                                   \
    if (rc_ < 0) {                                      \
      snprintf(failed_step, sizeof(failed_step), name); \
      err = rc_;                                        \
      goto out;                                         \
    }                                                   \
  } while (0)

static int veth_create(const char *host, const char *peer, int ns_fd) {
  msg_t m;
  msg_init(&m, RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL | NLM_F_ACK);
  struct ifinfomsg *ifi = msg_put(&m, sizeof(*ifi));
  ifi->ifi_family = AF_UNSPEC;
  ifi->ifi_flags = ifi->ifi_change = IFF_UP;
  attr_put(&m, IFLA_IFNAME, host, strlen(host) + 1);
  attr_put(&m, IFLA_MASTER, &bridge_index, sizeof(bridge_index));
  struct rtattr *info = nest_begin(&m, IFLA_LINKINFO);
  attr_put(&m, IFLA_INFO_KIND, "veth", 4);
  struct rtattr *data = nest_begin(&m, IFLA_INFO_DATA);
  struct rtattr *peer_attr = nest_begin(&m, VETH_INFO_PEER);
  struct ifinfomsg *pifi = msg_put(&m, sizeof(*pifi));
  pifi->ifi_family = AF_UNSPEC;  // not IFF_UP: the kernel refuses (ENOTCONN) for a peer in another netns
  attr_put(&m, IFLA_IFNAME, peer, strlen(peer) + 1);
  uint32_t fd = (uint32_t)ns_fd;
  attr_put(&m, IFLA_NET_NS_FD, &fd, sizeof(fd));
  nest_end(&m, peer_attr);
  nest_end(&m, data);
  nest_end(&m, info);
  return nl_call(host_nl, &m, NULL);
}

static int link_index(int fd, const char *name) {
  msg_t m, reply;
  msg_init(&m, RTM_GETLINK, 0);
  struct ifinfomsg *ifi = msg_put(&m, sizeof(*ifi));
  ifi->ifi_family = AF_UNSPEC;
  attr_put(&m, IFLA_IFNAME, name, strlen(name) + 1);
  int rc = nl_call(fd, &m, &reply);
  if (rc < 0) return rc;
  return ((struct ifinfomsg *)NLMSG_DATA(&reply.h))->ifi_index;
}

static int link_up(int fd, int index) {
  msg_t m;
  msg_init(&m, RTM_NEWLINK, NLM_F_ACK);
  struct ifinfomsg *ifi = msg_put(&m, sizeof(*ifi));
  ifi->ifi_family = AF_UNSPEC;
  ifi->ifi_index = index;
  ifi->ifi_flags = ifi->ifi_change = IFF_UP;
  return nl_call(fd, &m, NULL);
}

static int addr_add(int fd, int index, struct in_addr addr, int plen) {
  msg_t m;
  msg_init(&m, RTM_NEWADDR, NLM_F_CREATE | NLM_F_EXCL | NLM_F_ACK);
  struct ifaddrmsg *ifa = msg_put(&m, sizeof(*ifa));
  ifa->ifa_family = AF_INET;
  ifa->ifa_prefixlen = plen;
  ifa->ifa_index = index;
  attr_put(&m, IFA_LOCAL, &addr, sizeof(addr));
  attr_put(&m, IFA_ADDRESS, &addr, sizeof(addr));
  return nl_call(fd, &m, NULL);
}

static int default_route_add(int fd, int index, struct in_addr gw) {
  msg_t m;
  msg_init(&m, RTM_NEWROUTE, NLM_F_CREATE | NLM_F_EXCL | NLM_F_ACK);
  struct rtmsg *rt = msg_put(&m, sizeof(*rt));
  rt->rtm_family = AF_INET;
  rt->rtm_table = RT_TABLE_MAIN;
  rt->rtm_protocol = RTPROT_BOOT;
  rt->rtm_scope = RT_SCOPE_UNIVERSE;
  rt->rtm_type = RTN_UNICAST;
  attr_put(&m, RTA_GATEWAY, &gw, sizeof(gw));
  uint32_t oif = index;
  attr_put(&m, RTA_OIF, &oif, sizeof(oif));
  return nl_call(fd, &m, NULL);
}

static int link_delete_in(int fd, const char *name) {
  msg_t m;
  msg_init(&m, RTM_DELLINK, NLM_F_ACK);
  struct ifinfomsg *ifi = msg_put(&m, sizeof(*ifi));
  ifi->ifi_family = AF_UNSPEC;
  attr_put(&m, IFLA_IFNAME, name, strlen(name) + 1);
  return nl_call(fd, &m, NULL);
}

static int link_delete(const char *name) { return link_delete_in(host_nl, name); }

// The VM flavor's extra kernel work, all inside the sandbox netns.

static int tap_create(int tun_fd, const char *name) {
  struct ifreq ifr;
  memset(&ifr, 0, sizeof(ifr));
  snprintf(ifr.ifr_name, IFNAMSIZ, "%s", name);
  ifr.ifr_flags = IFF_TAP | IFF_NO_PI | IFF_VNET_HDR;
  if (ioctl(tun_fd, TUNSETIFF, &ifr) < 0) return -errno;
  if (ioctl(tun_fd, TUNSETPERSIST, 1) < 0) return -errno;
  return 0;
}

static struct tcmsg *tc_header(msg_t *m, int index, uint32_t handle, uint32_t parent, uint32_t info) {
  struct tcmsg *t = msg_put(m, sizeof(*t));
  t->tcm_family = AF_UNSPEC;
  t->tcm_ifindex = index;
  t->tcm_handle = handle;
  t->tcm_parent = parent;
  t->tcm_info = info;
  return t;
}

static int ingress_qdisc_add(int fd, int index) {
  msg_t m;
  msg_init(&m, RTM_NEWQDISC, NLM_F_CREATE | NLM_F_EXCL | NLM_F_ACK);
  tc_header(&m, index, 0xFFFF0000, TC_H_INGRESS, 0);
  attr_put(&m, TCA_KIND, "ingress", 8);
  return nl_call(fd, &m, NULL);
}

// `tc filter add dev FROM ingress protocol all u32 match u8 0 0 action mirred egress redirect dev TO`
static int redirect_add(int fd, int from, int to) {
  msg_t m;
  msg_init(&m, RTM_NEWTFILTER, NLM_F_CREATE | NLM_F_EXCL | NLM_F_ACK);
  tc_header(&m, from, 0, 0xFFFFFFF2, TC_H_MAKE(1u << 16, htons(ETH_P_ALL)));
  attr_put(&m, TCA_KIND, "u32", 4);
  struct rtattr *options = nest_begin(&m, TCA_OPTIONS);
  struct rtattr *acts = nest_begin(&m, TCA_U32_ACT);
  struct rtattr *first = nest_begin(&m, 1);
  attr_put(&m, TCA_ACT_KIND, "mirred", 7);
  struct rtattr *act_opts = nest_begin(&m, TCA_ACT_OPTIONS | NLA_F_NESTED);
  struct tc_mirred mirred = {.action = TC_ACT_STOLEN, .eaction = TCA_EGRESS_REDIR, .ifindex = (uint32_t)to};
  attr_put(&m, TCA_MIRRED_PARMS, &mirred, sizeof(mirred));
  nest_end(&m, act_opts);
  nest_end(&m, first);
  nest_end(&m, acts);
  struct {
    struct tc_u32_sel sel;
    struct tc_u32_key key;  // mask 0, value 0: every packet
  } sel = {.sel = {.flags = TC_U32_TERMINAL, .nkeys = 1}};
  attr_put(&m, TCA_U32_SEL, &sel, sizeof(sel));
  nest_end(&m, options);
  return nl_call(fd, &m, NULL);
}

static int attach(const char *ns_path, const char *host, const char *peer, const char *cidr, const char *gw_s, const char *tap) {
  int err = 0, ns_fd = -1, ns_nl = -1, tun_fd = -1, index, tap_index;
  char addr_s[64];
  struct in_addr addr, gw;
  const char *slash = strchr(cidr, '/');
  snprintf(failed_step, sizeof(failed_step), "parse address");
  if (!slash || (size_t)(slash - cidr) >= sizeof(addr_s)) return -EINVAL;
  memcpy(addr_s, cidr, slash - cidr);
  addr_s[slash - cidr] = 0;
  int plen = atoi(slash + 1);
  if (inet_pton(AF_INET, addr_s, &addr) != 1 || inet_pton(AF_INET, gw_s, &gw) != 1 || plen < 0 || plen > 32) return -EINVAL;

  ns_fd = open(ns_path, O_RDONLY | O_CLOEXEC);
  STEP("open netns", ns_fd < 0 ? -errno : 0);
  STEP("create veth", veth_create(host, peer, ns_fd));
  STEP("open netlink in netns", ns_nl = nl_open_in_with_tun(ns_fd, tap ? &tun_fd : NULL));
  STEP("look up peer", index = link_index(ns_nl, peer));
  STEP("set peer up", link_up(ns_nl, index));
  STEP("add address", addr_add(ns_nl, index, addr, plen));
  STEP("add default route", default_route_add(ns_nl, index, gw));
  if (tap) {
    STEP("create tap", tap_create(tun_fd, tap));
    STEP("look up tap", tap_index = link_index(ns_nl, tap));
    STEP("set tap up", link_up(ns_nl, tap_index));
    STEP("ingress qdisc on peer", ingress_qdisc_add(ns_nl, index));
    STEP("ingress qdisc on tap", ingress_qdisc_add(ns_nl, tap_index));
    STEP("redirect peer to tap", redirect_add(ns_nl, index, tap_index));
    STEP("redirect tap to peer", redirect_add(ns_nl, tap_index, index));
  }
out:
  if (tun_fd >= 0) close(tun_fd);
  if (ns_nl >= 0) close(ns_nl);
  if (ns_fd >= 0) close(ns_fd);
  return err;
}

static int detach_vm(const char *ns_path, const char *host, const char *tap) {
  int err = 0, ns_fd = -1, ns_nl = -1;
  ns_fd = open(ns_path, O_RDONLY | O_CLOEXEC);
  STEP("open netns", ns_fd < 0 ? -errno : 0);
  STEP("open netlink in netns", ns_nl = nl_open_in(ns_fd));
  STEP("delete tap", link_delete_in(ns_nl, tap));
  STEP("delete link", link_delete(host));
out:
  if (ns_nl >= 0) close(ns_nl);
  if (ns_fd >= 0) close(ns_fd);
  return err;
}

// ---------------------------------------------------------------------------------------------
// Driver

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + ts.tv_nsec;
}

static void answer(int rc, uint64_t elapsed) {
  if (rc < 0)
    printf("err %s: %s\n", failed_step, strerror(-rc));
  else
    printf("ok %llu\n", (unsigned long long)elapsed);
  fflush(stdout);
}

static int serve(void) {
  char line[1024];
  while (fgets(line, sizeof(line), stdin)) {
    char *words[8] = {0};
    int n = 0;
    for (char *save, *w = strtok_r(line, " \t\r\n", &save); w && n < 8; w = strtok_r(NULL, " \t\r\n", &save)) words[n++] = w;
    if (n == 0) continue;
    uint64_t t0 = now_ns();
    int rc;
    if (!strcmp(words[0], "attach") && n == 6) {
      rc = attach(words[1], words[2], words[3], words[4], words[5], NULL);
    } else if (!strcmp(words[0], "attach-vm") && n == 7) {
      rc = attach(words[1], words[2], words[3], words[4], words[5], words[6]);
    } else if (!strcmp(words[0], "detach") && n == 2) {
      snprintf(failed_step, sizeof(failed_step), "delete link");
      rc = link_delete(words[1]);
    } else if (!strcmp(words[0], "detach-vm") && n == 4) {
      rc = detach_vm(words[1], words[2], words[3]);
    } else {
      snprintf(failed_step, sizeof(failed_step), "command (want attach NS HOST PEER A/P GW | attach-vm ... TAP | detach HOST | detach-vm NS HOST TAP)");
      rc = -EINVAL;
    }
    answer(rc, now_ns() - t0);
  }
  return 0;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

static void summarize(const char *what, uint64_t *v, int n) {
  qsort(v, n, sizeof(*v), cmp_u64);
  printf("%s n=%d p50=%.3fms p90=%.3fms p99=%.3fms max=%.3fms\n", what, n, v[n / 2] / 1e6, v[n * 9 / 10] / 1e6,
         v[n * 99 / 100] / 1e6, v[n - 1] / 1e6);
}

static int count_loop(int count, const char *ns, const char *host, const char *addr, const char *gw) {
  uint64_t *a = calloc(count, sizeof(*a)), *d = calloc(count, sizeof(*d));
  for (int i = 0; i < count; i++) {
    uint64_t t0 = now_ns();
    int rc = attach(ns, host, "eth0", addr, gw, NULL);
    uint64_t t1 = now_ns();
    if (rc < 0) {
      fprintf(stderr, "knit-floor: attach %d: %s: %s\n", i, failed_step, strerror(-rc));
      return 1;
    }
    rc = link_delete(host);
    uint64_t t2 = now_ns();
    if (rc < 0) {
      fprintf(stderr, "knit-floor: detach %d: %s\n", i, strerror(-rc));
      return 1;
    }
    a[i] = t1 - t0;
    d[i] = t2 - t1;
  }
  summarize("attach", a, count);
  summarize("detach", d, count);
  return 0;
}

static void usage(void) {
  fprintf(stderr,
          "usage: knit-floor --bridge BR --serve\n"
          "       knit-floor --bridge BR --netns PATH --addr A/P --gw G [--host NAME] --count N\n");
  exit(2);
}

int main(int argc, char **argv) {
  const char *bridge = NULL, *ns = NULL, *addr = NULL, *gw = NULL, *host = "kfloor0";
  int serve_mode = 0, count = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--serve")) serve_mode = 1;
    else if (!v) usage();
    else if (!strcmp(a, "--bridge")) bridge = v, i++;
    else if (!strcmp(a, "--netns")) ns = v, i++;
    else if (!strcmp(a, "--addr")) addr = v, i++;
    else if (!strcmp(a, "--gw")) gw = v, i++;
    else if (!strcmp(a, "--host")) host = v, i++;
    else if (!strcmp(a, "--count")) count = atoi(v), i++;
    else usage();
  }
  if (!bridge || (!serve_mode && (!ns || !addr || !gw || count <= 0))) usage();
  bridge_index = if_nametoindex(bridge);
  if (!bridge_index) {
    fprintf(stderr, "knit-floor: bridge %s: %s\n", bridge, strerror(errno));
    return 1;
  }
  host_nl = nl_open();
  if (host_nl < 0) {
    fprintf(stderr, "knit-floor: netlink socket: %s\n", strerror(-host_nl));
    return 1;
  }
  return serve_mode ? serve() : count_loop(count, ns, host, addr, gw);
}
