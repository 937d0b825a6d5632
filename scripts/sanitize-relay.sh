#!/usr/bin/env bash
# Runs vitest files against the native relay built under AddressSanitizer + UBSan: builds it
# (node scripts/build-native.mjs --sanitize -> native/build-sanitize/build/Release/roomgate_relay.node),
# points ROOMGATE_RELAY_ADDON at it and preloads the sanitizer runtimes into Node (Node itself is
# not instrumented, so the runtimes must come first: LD_PRELOAD). Exits non-zero when a test
# fails, when a sanitizer reports (the process aborts: abort_on_error / halt_on_error), and when
# a report shows in the output at all (a report in a worker the runner survived still fails).
#   bash scripts/sanitize-relay.sh [vitest files...]
# Default files: test/proxy/relay-differential.test.ts, and test/proxy/tunnel-contract.test.ts when present.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/node24.sh

files=("$@")
if [ ${#files[@]} -eq 0 ]; then
  files=(test/proxy/relay-differential.test.ts)
  if [ -f test/proxy/tunnel-contract.test.ts ]; then files+=(test/proxy/tunnel-contract.test.ts); else echo "sanitize-relay: test/proxy/tunnel-contract.test.ts is absent: skipped" >&2; fi
fi

addon="$PWD/native/build-sanitize/build/Release/roomgate_relay.node"
cxx="${CXX:-g++}"
# The sanitizer flags also through the environment (gyp's make output adds CXXFLAGS and LDFLAGS), so
# the build is sanitized even should native/binding.gyp's condition not hold (it once compared the
# number gyp makes of -Dsanitize=1 with a string, and never held).
san_flags="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined -g"
sanitized() { [ -f "$addon" ] && [[ "$(ldd "$addon")" == *libasan* ]]; }
CXXFLAGS="$san_flags ${CXXFLAGS:-}" LDFLAGS="-fsanitize=address,undefined ${LDFLAGS:-}" node scripts/build-native.mjs --sanitize --quiet
if ! sanitized; then
  CXXFLAGS="$san_flags ${CXXFLAGS:-}" LDFLAGS="-fsanitize=address,undefined ${LDFLAGS:-}" node scripts/build-native.mjs --sanitize --force --quiet
fi
asan="$("$cxx" -print-file-name=libasan.so)"
ubsan="$("$cxx" -print-file-name=libubsan.so)"
for lib in "$asan" "$ubsan"; do
  if [ ! -e "$lib" ]; then echo "sanitize-relay: no sanitizer runtime at $lib ($cxx -print-file-name)" >&2; exit 2; fi
done
# The addon must really be the sanitized one: it links libasan.
if ! sanitized; then echo "sanitize-relay: $addon is not linked with libasan" >&2; exit 2; fi

log="$(mktemp -t roomgate-sanitize.XXXXXX)"
trap 'rm -f "$log"' EXIT
status=0
# detect_leaks=0: Node's own allocations (never freed at exit) are not the relay's; the relay's
# leaks are bench/relay-leak.ts's. Node reserves large ranges itself: no overcommit check.
ROOMGATE_RELAY_ADDON="$addon" \
  LD_PRELOAD="$asan:$ubsan${LD_PRELOAD:+:$LD_PRELOAD}" \
  ASAN_OPTIONS="detect_leaks=0:abort_on_error=1:halt_on_error=1:allow_user_segv_handler=1:detect_odr_violation=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}" \
  UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}" \
  node node_modules/vitest/vitest.mjs run "${files[@]}" 2>&1 | tee "$log" || status=$?
if grep -Eq 'ERROR: AddressSanitizer|ERROR: LeakSanitizer|runtime error:|SUMMARY: (Address|Undefined)' "$log"; then
  echo "sanitize-relay: a sanitizer reported (above)" >&2
  [ "$status" -ne 0 ] || status=3
fi
exit "$status"
