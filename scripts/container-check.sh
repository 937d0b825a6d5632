#!/usr/bin/env bash
# The container check (issue 28), run by .ci/run after the unit suite and by hand the same way:
#   sudo bash scripts/container-check.sh [image,demo,tls,sidecar]     # default: all
# Builds the local stand-ins for the base images when they are missing (scripts/local-base-images.sh;
# no registry needed), builds roomgate's image, then runs the image alone and each topology of
# deploy/ as containers with podman and podman-compose, asserting what each file promises. Prints a
# PASS/FAIL line per assertion and the timings; exit 1 on any FAIL. Needs root (rootful podman),
# node and npm (after `npm ci`: the check uses the yaml and ws packages).
# Everything this run starts is named after ROOMGATE_CHECK_RUN and removed on exit, failure or not.
# The OCI runtime: runc, or ROOMGATE_CHECK_RUNTIME; a pre-flight container says at once, in one
# message, when podman cannot start any container on this host.
# Time box: ROOMGATE_CONTAINER_CHECK_BUDGET_S (default 180) seconds for running the image and the
# topologies; building roomgate's image (at most 300 s, uncached on a fresh machine) and the base
# images (first run only, at most 300 s) come on top.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "container-check: run as root (rootful podman), e.g. sudo bash $0" >&2; exit 2; }

t0=$(date +%s)
# Debian's mirror and the npm registry set the pace here (about a minute, once per machine).
timeout --kill-after=10 300 bash scripts/local-base-images.sh
echo "base images ready in $(( $(date +%s) - t0 )) s"

run="rgcheck$$"
export ROOMGATE_CHECK_RUN=$run
state=$(mktemp -d /tmp/roomgate-container-check.XXXXXX)
# Some sandboxes (this CI among them) cannot raise rlimits inside containers: podman's defaults fail
# with "error setting rlimits". The check's own containers.conf sets limits any machine grants;
# your podman configuration is left alone (CONTAINERS_CONF applies to this run only).
# CONTAINERS_CONF replaces the machine's configuration, its runtime choice included: podman would
# fall back to crun, which fails every start on hybrid cgroups ("crun: cgroups in hybrid mode not
# supported"). So the runtime is chosen here too: runc (local-base-images.sh installs it), or
# ROOMGATE_CHECK_RUNTIME (a name podman knows or a path).
runtime=${ROOMGATE_CHECK_RUNTIME:-}
[ -n "$runtime" ] || ! command -v runc >/dev/null || runtime=runc
{
  printf '[containers]\ndefault_ulimits = ["nofile=4096:4096", "nproc=4096:4096"]\n'
  [ -z "$runtime" ] || printf '[engine]\nruntime = "%s"\n' "$runtime"
} >"$state/containers.conf"
export CONTAINERS_CONF="$state/containers.conf"
export ROOMGATE_CHECK_STATE=$state   # the derived compose files go here too

# Removes what this run started: containers (compose projects, the pod, the lone image run),
# pods, networks and volumes whose names start with the run id. Safe to call twice.
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  local c p n v
  c=$(podman ps -a --format '{{.Names}}' 2>/dev/null | grep "^$run" || true)
  [ -z "$c" ] || podman rm -f -t 0 $c >/dev/null 2>&1 || true
  p=$(podman pod ls --format '{{.Name}}' 2>/dev/null | grep "^$run" || true)
  [ -z "$p" ] || podman pod rm -f -t 0 $p >/dev/null 2>&1 || true
  n=$(podman network ls --format '{{.Name}}' 2>/dev/null | grep "^$run" || true)
  [ -z "$n" ] || podman network rm -f $n >/dev/null 2>&1 || true
  v=$(podman volume ls --format '{{.Name}}' 2>/dev/null | grep "^$run" || true)
  [ -z "$v" ] || podman volume rm -f $v >/dev/null 2>&1 || true
  local left
  left=$( { podman ps -a --format '{{.Names}}'; podman pod ls --format '{{.Name}}'; podman network ls --format '{{.Name}}'; podman volume ls --format '{{.Name}}'; } 2>/dev/null | grep -c "^$run" || true)
  if [ "$left" != 0 ]; then echo "container-check: $left object(s) named $run* could not be removed" >&2; rc=1; fi
  rm -rf "$state"
  exit "$rc"
}
trap cleanup EXIT

# Pre-flight: one container of the stand-in base image, before any topology. A host where podman
# cannot start any container gets one message naming the cause, not a FAIL per topology.
bash scripts/container-check/preflight.sh "$run-preflight" "${runtime:-the podman default}"

budget=${ROOMGATE_CONTAINER_CHECK_BUDGET_S:-180}
# The script keeps its own time box; `timeout` is the backstop should a child process hang. It runs
# in the background so a signal reaches this shell at once (bash runs traps only between commands):
# the trap stops it (timeout passes the signal on to the whole check: node, podman, podman-compose)
# before the cleanup removes what was started.
timeout --kill-after=10 $((budget + 360)) node scripts/container-check/main.mjs "$@" &
child=$!
stop() { kill -TERM "$child" 2>/dev/null || true; wait "$child" 2>/dev/null || true; exit "$1"; }
trap 'stop 130' INT
trap 'stop 143' TERM
wait "$child"
