{
  "targets": [
    {
      "target_name": "knit_native",
      "sources": [
        "native/src/addon.cc",
        "native/src/errors.cc",
        "native/src/ns_thread.cc",
        "native/src/netns.cc",
        "native/src/netns_pin.cc",
        "native/src/netns_js.cc",
        "native/src/fdpass.cc",
        "native/src/fdpass_js.cc",
        "native/src/peercred.cc",
        "native/src/netlink_reader.cc",
        "native/src/monitor.cc",
        "native/src/monitor_js.cc",
        "native/src/packet_taps.cc",
        "native/src/packet_taps_js.cc",
        "native/src/nflog.cc",
        "native/src/nflog_js.cc",
        "native/src/handle.cc",
        "native/src/tun.cc",
        "native/src/sysctl.cc",
        "native/src/proc_sys.cc",
        "native/src/child_exec.cc",
        "native/src/child_exec_js.cc",
        "native/src/nl/message.cc",
        "native/src/nl/socket.cc",
        "native/src/nl/fields.cc",
        "native/src/nl/inet.cc",
        "native/src/nl/request_builder.cc",
        "native/src/nl/link.cc",
        "native/src/nl/link_evict.cc",
        "native/src/nl/addr.cc",
        "native/src/nl/route.cc",
        "native/src/nl/neigh.cc",
        "native/src/nl/fdb.cc",
        "native/src/nl/tbf.cc",
        "native/src/nl/tc.cc",
        "native/src/nl/vf.cc",
        "native/src/nl/sysctl_tun_ops.cc",
        "native/src/nl/exec.cc",
        "native/src/nl/prepare.cc",
        "native/src/nl/to_js.cc",
        "native/src/nl/describe_js.cc"
      ],
      "include_dirs": [
        "<!(node -p \"require('node-addon-api').include_dir\")",
        "native/src"
      ],
      "defines": ["NAPI_VERSION=8", "NAPI_DISABLE_CPP_EXCEPTIONS", "_GNU_SOURCE"],
      "cflags_cc": ["-std=c++17", "-Wall", "-Wextra", "-Wno-unused-parameter"],
      "cflags_cc!": ["-fno-exceptions"],
      "libraries": ["-lpthread"]
    }
  ]
}
