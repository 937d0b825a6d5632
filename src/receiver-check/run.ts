// Sends the receiver checks (calls.ts) to a backend one at a time, in order, and judges each
// answer: a refusal must be 403 (not a 2xx, not a crash), a genuine push a 2xx, the hello a 200
// whose JSON names a version; a resume handshake (sent only when the hello says resume) must not
// open. What was seen is kept for the report: the status, or why no answer came (refused
// connection, timeout).
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import https from 'node:https';
import { handoffCalls, pushCalls, resumeCalls, type CheckCall, type ReceiverTarget, type Want } from './calls.js';

export interface CheckResult {
  readonly name: string;
  readonly ok: boolean;
  /** What the answer had to be, in words. */
  readonly want: string;
  /** What came: "403", "204", "200 {"version":1}", "101", or the error. */
  readonly saw: string;
}

const WANT_WORDS: Readonly<Record<Want, string>> = { refused: '403', taken: 'a 2xx', hello: '200 with {"version": N}', 'not-opened': 'a 4xx (not a 101)' };

/** An answer: its status and text, or why none came. */
type Seen = { readonly status: number; readonly text: string } | { readonly error: string };

async function post(t: ReceiverTarget, call: CheckCall, timeoutMs: number): Promise<Seen> {
  try {
    const res = await fetch(new URL(call.path, t.url), { method: 'POST', headers: call.headers, body: call.body, redirect: 'manual', signal: AbortSignal.timeout(timeoutMs) });
    return { status: res.status, text: (await res.text().catch(() => '')).slice(0, 200) };
  } catch (err) {
    const e = err as Error & { cause?: { code?: string } };
    return { error: e.name === 'TimeoutError' ? `no answer in ${timeoutMs} ms` : `no answer (${e.cause?.code ?? e.message})` };
  }
}

/** A WebSocket handshake: 101 when it opened (the socket is dropped at once), else the status. */
function upgrade(t: ReceiverTarget, call: CheckCall, timeoutMs: number): Promise<Seen> {
  const url = new URL(call.path, t.url);
  const headers = { ...call.headers, Connection: 'Upgrade', Upgrade: 'websocket', 'Sec-WebSocket-Version': '13', 'Sec-WebSocket-Key': randomBytes(16).toString('base64') };
  return new Promise((resolve) => {
    const req = (url.protocol === 'https:' ? https : http).request(url, { method: 'GET', headers, timeout: timeoutMs });
    req.on('upgrade', (_res, socket) => {
      socket.destroy();
      resolve({ status: 101, text: '' });
    });
    req.on('response', (res) => {
      res.resume();
      resolve({ status: res.statusCode ?? 0, text: '' });
    });
    req.on('timeout', () => {
      req.destroy();
      resolve({ error: `no answer in ${timeoutMs} ms` });
    });
    req.on('error', (err: NodeJS.ErrnoException) => resolve({ error: `no answer (${err.code ?? err.message})` }));
    req.end();
  });
}

/** One call's answer judged; `timeoutMs` bounds it. */
async function send(t: ReceiverTarget, call: CheckCall, timeoutMs: number): Promise<CheckResult & { text: string }> {
  const want = WANT_WORDS[call.want];
  const seen = call.upgrade ? await upgrade(t, call, timeoutMs) : await post(t, call, timeoutMs);
  if ('error' in seen) return { name: call.name, ok: false, want, saw: seen.error, text: '' };
  const saw = call.want === 'hello' ? `${seen.status} ${seen.text.replace(/\s+/g, ' ').trim()}`.trim() : String(seen.status);
  return { name: call.name, ok: judge(call.want, seen.status, seen.text), want, saw, text: seen.text };
}

function judge(want: Want, status: number, text: string): boolean {
  if (want === 'refused') return status === 403;
  if (want === 'taken') return status >= 200 && status < 300;
  if (want === 'not-opened') return status >= 400 && status < 500;
  try {
    const version = (JSON.parse(text) as { version?: unknown }).version;
    return status === 200 && Number.isInteger(version) && (version as number) >= 1;
  } catch {
    return false;
  }
}

/** Whether a hello's answer offers the socket resume of protocol version 2. */
function offersResume(text: string): boolean {
  try {
    return (JSON.parse(text) as { resume?: unknown }).resume === true;
  } catch {
    return false;
  }
}

/** Every check for what `t` serves (its push path, its hooks, its resume handshake), in order. */
export async function checkReceiver(t: ReceiverTarget, o: { nowMs?: number; timeoutMs?: number } = {}): Promise<CheckResult[]> {
  const nowMs = o.nowMs ?? Date.now();
  const calls = [...(t.pushPath === null ? [] : pushCalls(t, t.pushPath, nowMs)), ...(t.handoffPath === null ? [] : handoffCalls(t, t.handoffPath, nowMs))];
  const out: CheckResult[] = [];
  let resume = false;
  for (const call of calls) {
    const { text, ...result } = await send(t, call, o.timeoutMs ?? 5_000);
    if (call.want === 'hello' && result.ok) resume = offersResume(text);
    out.push(result);
  }
  if (!resume) return out;
  for (const call of resumeCalls(t, t.wsPath ?? '/ws/live/', nowMs)) {
    const { text: _, ...result } = await send(t, call, o.timeoutMs ?? 5_000);
    out.push(result);
  }
  return out;
}
