// Reading the deployment files for the structural tests in test/deploy: the Dockerfile (parsed into
// stages and instructions), .dockerignore (matched like Docker does), compose files (YAML with
// merge keys, ${VAR:-default} interpolation) and kustomize bases (every resource document).
// No Docker engine or cluster is needed: the files are checked as text and data.
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { ROOT } from './processes.js';

export { ROOT };

export function readText(rel: string): string {
  return readFileSync(join(ROOT, rel), 'utf8');
}

/** A parsed YAML mapping; the tests check shapes themselves. */
export type Obj = Record<string, any>;

/** Every YAML document of a file (merge keys on, as Docker Compose reads them); throws on a YAML error. */
export function yamlDocs(rel: string): Obj[] {
  return yamlDocsOf(readText(rel), rel);
}

/** Every YAML document of a text (e.g. a patch embedded in a kustomization); throws on a YAML error. */
export function yamlDocsOf(text: string, rel = 'text'): Obj[] {
  const docs = parseAllDocuments(text, { merge: true });
  if (!Array.isArray(docs)) throw new Error(`${rel}: not YAML`);
  const out: Obj[] = [];
  for (const d of docs) {
    if (d.errors.length > 0) throw new Error(`${rel}: ${d.errors.map((e) => e.message).join('; ')}`);
    const v = d.toJS({ maxAliasCount: 100 }) as unknown;
    if (v !== null && v !== undefined) out.push(v as Obj);
  }
  return out;
}

/** A deep copy with no shared parts (YAML aliases share objects; a broken copy must not touch the original). */
export function clone<T>(v: T): T {
  return JSON.parse(JSON.stringify(v)) as T;
}

// --- Dockerfile -----------------------------------------------------------------------------------

export interface Instruction {
  readonly cmd: string; // upper case: FROM, RUN, COPY, ...
  readonly args: string;
  readonly line: number;
}

export interface Stage {
  readonly from: string;
  readonly name: string | undefined;
  readonly instructions: Instruction[];
}

/** Instructions with continuation lines joined and comment lines dropped (Docker's rules). */
export function parseDockerfile(text: string): Instruction[] {
  const out: Instruction[] = [];
  const lines = text.split('\n');
  let buf = '';
  let start = 0;
  lines.forEach((raw, i) => {
    const t = raw.trim();
    if (t.startsWith('#') || (t === '' && buf === '')) return;
    if (buf === '') start = i + 1;
    if (t.endsWith('\\')) {
      buf += `${t.slice(0, -1)} `;
      return;
    }
    buf += t;
    const m = /^(\S+)\s*(.*)$/s.exec(buf.trim());
    if (m) out.push({ cmd: m[1]!.toUpperCase(), args: m[2]!.trim(), line: start });
    buf = '';
  });
  return out;
}

export function dockerStages(instructions: readonly Instruction[]): Stage[] {
  const stages: Stage[] = [];
  for (const ins of instructions) {
    if (ins.cmd === 'FROM') {
      const m = /^(?:--\S+\s+)*(\S+)(?:\s+AS\s+(\S+))?$/i.exec(ins.args);
      stages.push({ from: m?.[1] ?? ins.args, name: m?.[2], instructions: [] });
    } else stages.at(-1)?.instructions.push(ins);
  }
  return stages;
}

/** The JSON array of an exec-form instruction (CMD ["a", "b"]), or undefined for shell form. */
export function execForm(args: string): string[] | undefined {
  if (!args.startsWith('[')) return undefined;
  try {
    const v = JSON.parse(args) as unknown;
    return Array.isArray(v) && v.every((x) => typeof x === 'string') ? (v as string[]) : undefined;
  } catch {
    return undefined;
  }
}

/** Like Docker: patterns in order, the last matching one decides; `!` re-includes. */
export function dockerignoreExcludes(patterns: string, path: string): boolean {
  let excluded = false;
  for (const raw of patterns.split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    const negate = line.startsWith('!');
    const pat = (negate ? line.slice(1) : line).replace(/^\/+/, '').replace(/\/+$/, '');
    const re = new RegExp(
      `^${pat
        .split(/(\*\*|\*|\?)/)
        .map((part) => (part === '**' ? '.*' : part === '*' ? '[^/]*' : part === '?' ? '[^/]' : part.replace(/[.+^${}()|[\]\\]/g, '\\$&')))
        .join('')}(/.*)?$`,
    );
    if (re.test(path)) excluded = !negate;
  }
  return excluded;
}

// --- Compose --------------------------------------------------------------------------------------

/** Compose interpolation of "${VAR}", "${VAR:-default}" and "${VAR-default}" with `env` (default: none set). */
export function interpolate(s: string, env: Record<string, string> = {}): string {
  return s.replace(/\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?-)([^}]*))?\}/g, (_m, name: string, op: string | undefined, def: string | undefined) => {
    const v = env[name];
    if (op === ':-') return v ? v : (def ?? '');
    if (op === '-') return v !== undefined ? v : (def ?? '');
    return v ?? '';
  });
}

/** A compose `environment` (map or list) as a map, interpolated. */
export function composeEnv(environment: unknown): Record<string, string> {
  const out: Record<string, string> = {};
  if (Array.isArray(environment)) {
    for (const e of environment as string[]) {
      const i = e.indexOf('=');
      out[i < 0 ? e : e.slice(0, i)] = i < 0 ? '' : interpolate(e.slice(i + 1));
    }
  } else if (environment && typeof environment === 'object') {
    for (const [k, v] of Object.entries(environment)) out[k] = interpolate(String(v ?? ''));
  }
  return out;
}

/** "15s", "1m30s", "500ms", "2h" -> milliseconds (compose durations). */
export function durationMs(s: string): number {
  let total = 0;
  const re = /(\d+(?:\.\d+)?)(ms|us|ns|h|m|s)/g;
  let consumed = '';
  for (let m = re.exec(s); m; m = re.exec(s)) {
    consumed += m[0];
    total += Number(m[1]) * { h: 3_600_000, m: 60_000, s: 1000, ms: 1, us: 0.001, ns: 0.000001 }[m[2] as 'h']!;
  }
  if (consumed !== s) throw new Error(`not a duration: ${s}`);
  return total;
}

// --- Kustomize ------------------------------------------------------------------------------------

export interface K8sDoc {
  readonly file: string;
  readonly doc: Obj;
}

export interface KustomizeBase {
  readonly dir: string;
  readonly kustomization: Obj;
  readonly docs: K8sDoc[];
}

/** The kustomization.yaml of `dir` and every document of its resources (files only; dirs recurse). */
export function loadKustomize(dir: string): KustomizeBase {
  const [kustomization] = yamlDocs(join(dir, 'kustomization.yaml'));
  if (!kustomization) throw new Error(`${dir}/kustomization.yaml is empty`);
  const docs: K8sDoc[] = [];
  for (const r of (kustomization.resources ?? []) as string[]) {
    const rel = join(dir, r);
    if (!existsSync(join(ROOT, rel))) continue; // reported by the resources-exist check
    if (existsSync(join(ROOT, rel, 'kustomization.yaml'))) docs.push(...loadKustomize(rel).docs);
    else for (const doc of yamlDocs(rel)) docs.push({ file: rel, doc });
  }
  return { dir, kustomization, docs };
}

export function resolveFrom(rel: string, ...parts: string[]): string {
  return resolve(ROOT, dirname(rel), ...parts);
}
