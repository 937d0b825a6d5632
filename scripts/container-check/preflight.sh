#!/usr/bin/env bash
# The container check's pre-flight (called by scripts/container-check.sh, with its CONTAINERS_CONF):
# starts one container of the stand-in base image and removes it. When podman cannot, says why in
# one message (podman's own error, the cgroup mode, the runtime chosen) and exits 1.
#   bash scripts/container-check/preflight.sh NAME RUNTIME-AS-SAID
set -uo pipefail
name=$1
runtime=$2
image=docker.io/library/node:24-bookworm-slim

# cgroup2fs: unified (v2); tmpfs with a cgroup2 mount at unified/: hybrid; tmpfs alone: v1.
cgroup_mode() {
  case "$(stat -fc %T /sys/fs/cgroup 2>/dev/null)" in
    cgroup2fs) echo "unified (cgroup v2)" ;;
    tmpfs) if [ "$(stat -fc %T /sys/fs/cgroup/unified 2>/dev/null)" = cgroup2fs ]; then echo "hybrid (v1 and v2)"; else echo "legacy (cgroup v1)"; fi ;;
    *) echo "unknown ($(stat -fc %T /sys/fs/cgroup 2>/dev/null || echo 'no /sys/fs/cgroup'))" ;;
  esac
}

out=$(timeout --kill-after=10 120 podman run --rm --name "$name" "$image" node -e 'process.exit(0)' 2>&1)
rc=$?
if [ "$rc" = 0 ]; then
  echo "pre-flight: a container starts (runtime: $runtime; cgroups: $(cgroup_mode))"
  exit 0
fi
podman rm -f -t 0 "$name" >/dev/null 2>&1 || true
# podman's last error line is the cause (the runtime's own words); the rest is context.
why=$(printf '%s\n' "$out" | grep -v '^\s*$' | tail -1)
[ -n "$why" ] || why="podman run exited $rc with no message"
[ "$rc" = 124 ] && why="no container started within 120 s"
echo "container-check: podman cannot start a container on this host, so no topology can run: $why (runtime: $runtime; cgroups: $(cgroup_mode); CONTAINERS_CONF=${CONTAINERS_CONF:-unset}). Choose a runtime that works here with ROOMGATE_CHECK_RUNTIME=NAME|PATH (runc works on hybrid cgroups, crun does not)." >&2
exit 1
