// TCP request/response between two pods, as netperf's TCP_RR and TCP_CRR measure it: one byte
// each way per transaction, on one connection (rr) or on a new connection each time (crr:
// connect, request, response, close). The server answers every byte it reads with one byte,
// one connection at a time. Built by bench/policy/traffic.mjs with the system cc.
//
//   tcp-rr server PORT              (runs until killed; prints "listening" once it is)
//   tcp-rr rr  HOST PORT SECONDS    → "<transactions> <seconds>"
//   tcp-rr crr HOST PORT SECONDS    → "<connections> <seconds>"
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void die(const char *what) {
  perror(what);
  exit(1);
}

static void nodelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

static _Noreturn void serve(int port) {
  int ls = socket(AF_INET, SOCK_STREAM, 0);
  if (ls < 0) die("socket");
  int one = 1;
  setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_ANY)};
  if (bind(ls, (struct sockaddr *)&a, sizeof a) < 0) die("bind");
  if (listen(ls, 128) < 0) die("listen");
  printf("listening\n");
  fflush(stdout);
  for (;;) {
    int c = accept(ls, NULL, NULL);
    if (c < 0) continue;
    nodelay(c);
    char b;
    while (read(c, &b, 1) == 1)
      if (write(c, &b, 1) != 1) break;
    close(c);
  }
}

static int dial(struct sockaddr_in *a) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) die("socket");
  nodelay(fd);
  if (connect(fd, (struct sockaddr *)a, sizeof *a) < 0) die("connect");
  return fd;
}

static int ping(int fd) {
  char b = 'x';
  return write(fd, &b, 1) == 1 && read(fd, &b, 1) == 1;
}

int main(int argc, char **argv) {
  if (argc == 3 && !strcmp(argv[1], "server")) serve(atoi(argv[2]));
  if (argc != 5 || (strcmp(argv[1], "rr") && strcmp(argv[1], "crr"))) {
    fprintf(stderr, "usage: tcp-rr server PORT | tcp-rr rr|crr HOST PORT SECONDS\n");
    return 2;
  }
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(atoi(argv[3]))};
  if (inet_pton(AF_INET, argv[2], &a.sin_addr) != 1) die("address");
  double seconds = atof(argv[4]), start = now(), end = start + seconds;
  long n = 0;
  if (!strcmp(argv[1], "rr")) {
    int fd = dial(&a);
    while (now() < end)
      for (int i = 0; i < 100; i++, n++)
        if (!ping(fd)) die("rr");
    close(fd);
  } else {
    // Closed with a reset (linger 0): the client keeps no TIME_WAIT, so its ports never run out.
    struct linger l = {.l_onoff = 1, .l_linger = 0};
    while (now() < end) {
      int fd = dial(&a);
      if (!ping(fd)) die("crr");
      setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
      close(fd);
      n++;
    }
  }
  printf("%ld %.3f\n", n, now() - start);
  return 0;
}
