// What `roomgate check-backend BACKEND` does (src/cli/commands/check-backend.ts says what it is):
// finds the backend's URL and keys, runs the receiver checks, prints them.
import { backendKeys, keyProblem } from '../../http/call-proof.js';
import { checkReceiver, type CheckResult } from '../../receiver-check/run.js';
import { adminRequest, adminTarget, reportAdminError } from '../admin-client.js';
import { flag, str, UsageError, type Parsed, type Values } from '../args.js';
import { print, printJson } from '../output.js';

const HINT = 'see: roomgate check-backend --help';
const PATH = /^\/[!-~]*$/;

/** BACKEND as a URL (its origin; --id or $ROOMGATE_BACKEND_ID names it), or an id the gateway knows. */
async function resolve(backend: string, values: Values): Promise<{ id: string; url: string } | number> {
  if (/^https?:\/\//i.test(backend)) {
    let url: URL;
    try {
      url = new URL(backend);
    } catch {
      throw new UsageError(`BACKEND ${JSON.stringify(backend)}: not a URL; expected http(s)://host:port or a backend id`, HINT);
    }
    const id = str(values, 'id') ?? process.env.ROOMGATE_BACKEND_ID ?? '';
    if (id === '') throw new UsageError('a URL needs the backend\'s id in roomgate: --id ID (or $ROOMGATE_BACKEND_ID); every call is made for it', HINT);
    return { id, url: url.origin };
  }
  try {
    const b = await adminRequest<{ url?: unknown }>(adminTarget(values), `/backends/${encodeURIComponent(backend)}`);
    if (typeof b.url !== 'string') throw new UsageError(`the gateway gives no URL for ${backend}`, HINT);
    return { id: backend, url: new URL(b.url).origin };
  } catch (err) {
    if (err instanceof UsageError) throw err;
    return reportAdminError(err, `check-backend ${backend}`, 'check-backend');
  }
}

/** The backend's keys: as it holds them ($ROOMGATE_BACKEND_KEYS), else derived from the call secrets. */
function keysFor(id: string): string[] {
  const held = (process.env.ROOMGATE_BACKEND_KEYS ?? '').split(',').map((k) => k.trim()).filter(Boolean);
  for (const k of held) {
    const problem = keyProblem(k);
    if (problem) throw new UsageError(`ROOMGATE_BACKEND_KEYS: ${problem}`, HINT);
  }
  if (held.length > 0) return held;
  const secrets = (process.env.ROOMGATE_CALL_SECRETS ?? '').split(',').map((s) => s.trim()).filter(Boolean);
  if (secrets.length === 0) throw new UsageError("no key: set ROOMGATE_BACKEND_KEYS to the backend's keys (roomgate backend-key ID prints them) or ROOMGATE_CALL_SECRETS to the gateways' call secrets", HINT);
  return backendKeys(secrets, id);
}

function pathOf(values: Values, name: 'push-path' | 'handoff-path', fallback: string, skipped: boolean): string | null {
  if (skipped) return null;
  const p = str(values, name) ?? fallback;
  if (!PATH.test(p)) throw new UsageError(`--${name} ${JSON.stringify(p)}: expected a path starting with "/", e.g. ${fallback}`, HINT);
  return p;
}

function skips(values: Values): Set<string> {
  const v = values.skip;
  const list = Array.isArray(v) ? (v as string[]) : typeof v === 'string' ? [v] : [];
  for (const s of list) if (s !== 'push' && s !== 'handoff') throw new UsageError(`--skip ${JSON.stringify(s)}: expected push or handoff`, HINT);
  if (list.includes('push') && list.includes('handoff')) throw new UsageError('--skip push and --skip handoff together leave nothing to check', HINT);
  return new Set(list);
}

export async function runCheckBackend({ values, positionals }: Parsed): Promise<number> {
  const skip = skips(values);
  const pushPath = pathOf(values, 'push-path', '/_roomgate/push', skip.has('push'));
  const handoffPath = pathOf(values, 'handoff-path', '/_roomgate/handoff', skip.has('handoff'));
  const target = await resolve(positionals[0] as string, values);
  if (typeof target === 'number') return target;
  const keys = keysFor(target.id);
  const results = await checkReceiver({ ...target, keys, pushPath, handoffPath });
  const failed = results.filter((r) => !r.ok).length;
  if (flag(values, 'json')) printJson({ backend: target.id, url: target.url, passed: results.length - failed, failed, checks: results });
  else print(report(target, keys.length, results, failed));
  return failed === 0 ? 0 : 1;
}

function report(t: { id: string; url: string }, keys: number, results: readonly CheckResult[], failed: number): string {
  const lines = [`${t.id} at ${t.url}, signed with ${keys} key${keys === 1 ? '' : 's'}`];
  for (const r of results) lines.push(r.ok ? `pass  ${r.name}: ${r.saw}` : `FAIL  ${r.name}: expected ${r.want}, saw ${r.saw}`);
  lines.push(failed === 0 ? `${results.length} of ${results.length} checks passed` : `${failed} of ${results.length} checks failed`);
  return lines.join('\n');
}
