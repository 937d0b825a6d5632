// Compose files as the check runs them. podman-compose 1.0.3 differs from Docker Compose in ways
// the check works around here rather than in deploy/ (the files stay Docker's):
//  - it merges a second -f file by appending lists, so the TLS overlay's healthcheck `test` and
//    `command` would be glued onto the base ones: the check merges the files itself with Docker
//    Compose's rules and hands podman-compose one file;
//  - the files publish fixed host ports (8080, 8081): the derived file publishes free ones, so the
//    check never collides with a demo or a test already running;
//  - it turns a healthcheck `test: ["CMD", ...]` into a broken shell line (it joins the quoted
//    words with "' '"), so the check hands it the same command as CMD-SHELL, quoted properly;
//  - relative paths are resolved against the original file's directory (the derived file lives in
//    a temporary directory).
// Everything else (images, commands, entrypoints, healthchecks, environment, volumes) is passed
// through unchanged: a file that drifts from the image fails the check.
import { createServer } from 'node:net';
import { readFileSync } from 'node:fs';
import { dirname, isAbsolute, resolve } from 'node:path';
import { parse } from 'yaml';

export function readCompose(path) {
  return parse(readFileSync(path, 'utf8'), { merge: true, maxAliasCount: 200 });
}

const clone = (v) => JSON.parse(JSON.stringify(v));
const isMap = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);
const UNIQUE_LISTS = new Set(['ports', 'expose', 'dns', 'dns_search', 'tmpfs', 'cap_add', 'cap_drop', 'devices', 'env_file', 'extra_hosts']);

/** environment/labels as a map (compose allows a list of KEY=VALUE). */
function asMap(v) {
  if (!Array.isArray(v)) return { ...(v ?? {}) };
  return Object.fromEntries(v.map((e) => (e.includes('=') ? [e.slice(0, e.indexOf('=')), e.slice(e.indexOf('=') + 1)] : [e, null])));
}

/** depends_on as {service: {condition}} (compose allows a list of names). */
export function dependsOn(service) {
  const d = service.depends_on ?? {};
  if (Array.isArray(d)) return Object.fromEntries(d.map((n) => [n, { condition: 'service_started' }]));
  return Object.fromEntries(Object.entries(d).map(([n, v]) => [n, { condition: v?.condition ?? 'service_started' }]));
}

function volumeTarget(v) {
  if (isMap(v)) return v.target;
  const parts = String(v).split(':');
  return parts.length === 1 ? parts[0] : parts[1];
}

/** One service of an overlay merged into the base service, by Docker Compose's merge rules. */
function mergeService(base, over) {
  const out = clone(base);
  for (const [key, value] of Object.entries(over)) {
    const old = out[key];
    if (old === undefined) out[key] = clone(value);
    else if (key === 'environment' || key === 'labels') out[key] = { ...asMap(old), ...asMap(value) };
    else if (key === 'depends_on') out[key] = { ...dependsOn({ depends_on: old }), ...dependsOn({ depends_on: value }) };
    else if (key === 'volumes') {
      const targets = new Set(value.map(volumeTarget));
      out[key] = [...old.filter((v) => !targets.has(volumeTarget(v))), ...value];
    } else if (UNIQUE_LISTS.has(key)) out[key] = [...new Set([...[old].flat(), ...[value].flat()])];
    else if (key === 'healthcheck' && isMap(old)) out[key] = { ...old, ...value }; // test is replaced whole
    else out[key] = clone(value); // command, entrypoint, scalars, anything else: the overlay's
  }
  return out;
}

/** Docker Compose's `-f base -f overlay`. */
export function mergeCompose(base, overlay) {
  const out = clone(base);
  for (const [key, value] of Object.entries(overlay)) {
    if (key === 'services') {
      out.services ??= {};
      for (const [name, svc] of Object.entries(value)) out.services[name] = out.services[name] ? mergeService(out.services[name], svc) : clone(svc);
    } else if (isMap(value) && isMap(out[key])) out[key] = { ...out[key], ...clone(value) };
    else out[key] = clone(value);
  }
  return out;
}

export function freePort() {
  return new Promise((resolvePort, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '0.0.0.0', () => {
      const { port } = s.address();
      s.close(() => resolvePort(port));
    });
  });
}

function absolute(dir, p) {
  return isAbsolute(p) ? p : resolve(dir, p);
}

/** Host port -> free port in every `ports` entry; returns {service: [{from, to, target}]}. */
async function remapPorts(services) {
  const published = {};
  for (const [name, svc] of Object.entries(services)) {
    if (!svc.ports) continue;
    const mapped = [];
    svc.ports = await Promise.all(
      svc.ports.map(async (p) => {
        if (isMap(p)) {
          const to = await freePort();
          mapped.push({ from: Number(p.published), to, target: Number(p.target) });
          return { ...p, published: String(to) };
        }
        const parts = String(p).split(':');
        if (parts.length < 2) throw new Error(`${name}: port ${p} has no host port; the check needs one to reach it`);
        const to = await freePort();
        const target = parts.at(-1);
        mapped.push({ from: Number(parts.at(-2)), to, target: Number(target) });
        return [...parts.slice(0, -2), String(to), target].join(':');
      }),
    );
    published[name] = mapped;
  }
  return published;
}

function resolvePaths(services, dir) {
  for (const svc of Object.values(services)) {
    if (isMap(svc.build) && svc.build.context) svc.build.context = absolute(dir, svc.build.context);
    else if (typeof svc.build === 'string') svc.build = absolute(dir, svc.build);
    if (svc.env_file) svc.env_file = [svc.env_file].flat().map((f) => absolute(dir, f));
    if (svc.volumes) {
      svc.volumes = svc.volumes.map((v) => {
        if (isMap(v)) return v.type === 'bind' ? { ...v, source: absolute(dir, v.source) } : v;
        const [src, ...rest] = String(v).split(':');
        return /^[./~]/.test(src) && rest.length ? [absolute(dir, src), ...rest].join(':') : v;
      });
    }
  }
}

/** A word for /bin/sh, single-quoted. */
const shellWord = (w) => `'${String(w).replace(/'/g, `'\\''`)}'`;

function shellHealthchecks(services) {
  for (const svc of Object.values(services)) {
    const t = svc.healthcheck?.test;
    if (Array.isArray(t) && t[0] === 'CMD') svc.healthcheck.test = ['CMD-SHELL', t.slice(1).map(shellWord).join(' ')];
  }
}

/**
 * The file(s) as one compose document the check can run: merged, free host ports, absolute
 * paths. `published` maps each service to its remapped ports.
 */
export async function deriveCompose(files, { forPodmanCompose = false } = {}) {
  const docs = files.map((f) => readCompose(f));
  const doc = docs.slice(1).reduce((acc, d) => mergeCompose(acc, d), docs[0]);
  resolvePaths(doc.services, dirname(resolve(files[0])));
  const published = await remapPorts(doc.services);
  if (forPodmanCompose) shellHealthchecks(doc.services);
  // JSON is YAML, and quotes every string: PyYAML (podman-compose) reads YAML 1.1, where a bare
  // `no` would turn into false.
  return { doc, published, text: JSON.stringify(doc, null, 2) };
}

/** Services in start order: each wave only depends on earlier waves. */
export function startWaves(services) {
  const waves = [];
  const placed = new Set();
  const names = Object.keys(services);
  while (placed.size < names.length) {
    const wave = names.filter((n) => !placed.has(n) && Object.keys(dependsOn(services[n])).every((d) => placed.has(d)));
    if (wave.length === 0) throw new Error(`depends_on has a cycle or names a missing service among ${names.filter((n) => !placed.has(n)).join(', ')}`);
    wave.forEach((n) => placed.add(n));
    waves.push(wave);
  }
  return waves;
}

/** ${VAR:-default} / ${VAR-default} / ${VAR} with the process environment, as compose does. */
export function interpolate(s) {
  return String(s).replace(/\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?-)([^}]*))?\}/g, (_m, name, op, def) => {
    const v = process.env[name];
    if (op === ':-') return v ? v : (def ?? '');
    if (op === '-') return v !== undefined ? v : (def ?? '');
    return v ?? '';
  });
}
