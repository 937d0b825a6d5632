// Sends the receiver checks (calls.ts) to a backend one at a time, in order, and judges each
// answer: a refusal must be 403 (not a 2xx, not a crash), a genuine push a 2xx, the hello a 200
// whose JSON names a version. What was seen is kept for the report: the status, or why no answer
// came (refused connection, timeout).
import { handoffCalls, pushCalls, type CheckCall, type ReceiverTarget, type Want } from './calls.js';

export interface CheckResult {
  readonly name: string;
  readonly ok: boolean;
  /** What the answer had to be, in words. */
  readonly want: string;
  /** What came: "403", "204", "200 {"version":1}", or the error. */
  readonly saw: string;
}

const WANT_WORDS: Readonly<Record<Want, string>> = { refused: '403', taken: 'a 2xx', hello: '200 with {"version": N}' };

/** One call's answer judged; `timeoutMs` bounds it. */
async function send(t: ReceiverTarget, call: CheckCall, timeoutMs: number): Promise<CheckResult> {
  const want = WANT_WORDS[call.want];
  let res: Response;
  try {
    res = await fetch(new URL(call.path, t.url), { method: 'POST', headers: call.headers, body: call.body, redirect: 'manual', signal: AbortSignal.timeout(timeoutMs) });
  } catch (err) {
    const e = err as Error & { cause?: { code?: string } };
    return { name: call.name, ok: false, want, saw: e.name === 'TimeoutError' ? `no answer in ${timeoutMs} ms` : `no answer (${e.cause?.code ?? e.message})` };
  }
  const text = (await res.text().catch(() => '')).slice(0, 200);
  const saw = call.want === 'hello' ? `${res.status} ${text.replace(/\s+/g, ' ').trim()}`.trim() : String(res.status);
  return { name: call.name, ok: judge(call.want, res.status, text), want, saw };
}

function judge(want: Want, status: number, text: string): boolean {
  if (want === 'refused') return status === 403;
  if (want === 'taken') return status >= 200 && status < 300;
  try {
    const version = (JSON.parse(text) as { version?: unknown }).version;
    return status === 200 && Number.isInteger(version) && (version as number) >= 1;
  } catch {
    return false;
  }
}

/** Every check for what `t` serves (its push path, its hooks), in order. */
export async function checkReceiver(t: ReceiverTarget, o: { nowMs?: number; timeoutMs?: number } = {}): Promise<CheckResult[]> {
  const nowMs = o.nowMs ?? Date.now();
  const calls = [...(t.pushPath === null ? [] : pushCalls(t, t.pushPath, nowMs)), ...(t.handoffPath === null ? [] : handoffCalls(t, t.handoffPath, nowMs))];
  const out: CheckResult[] = [];
  for (const call of calls) out.push(await send(t, call, o.timeoutMs ?? 5_000));
  return out;
}
