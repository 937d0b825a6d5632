# The native relay (relay.cc) and the health check's connection (probe.cc), built by node-gyp
# against the headers of the Node that runs the build (scripts/build-native.mjs passes --nodedir:
# nothing is downloaded). Node-API, and libuv (uv.h: relay.cc takes a lent descriptor out of
# Node's epoll set; probe.cc runs libuv TCP handles on Node's loop), whose ABI libuv keeps within
# its major version: one build serves every Node version roomgate runs on.
# ROOMGATE_NATIVE_SANITIZE=1 builds it under AddressSanitizer and UBSan (test builds:
# scripts/build-native.mjs --sanitize).
{
  # A number: gyp reads -Dsanitize=1 as one (a string '1' would never equal it).
  'variables': { 'sanitize%': 0 },
  'targets': [
    {
      'target_name': 'roomgate_relay',
      'sources': ['relay.cc', 'probe.cc'],
      'defines': ['NAPI_VERSION=8'],
      'cflags_cc': ['-std=c++17', '-O2', '-Wall', '-Wextra', '-Wno-unused-parameter', '-Wno-missing-field-initializers', '-fvisibility=hidden'],
      'cflags_cc!': ['-fno-exceptions', '-std=gnu++17', '-std=gnu++20'],
      'ldflags': ['-pthread'],
      'conditions': [
        ['sanitize==1', {
          'cflags_cc': ['-fsanitize=address,undefined', '-fno-omit-frame-pointer', '-fno-sanitize-recover=undefined', '-g'],
          'ldflags': ['-fsanitize=address,undefined'],
        }],
      ],
    },
  ],
}
