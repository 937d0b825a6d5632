// Whether each backend serves the handoff hooks (POST {handoff.path}/hello answers 200
// {"version":1}, or {"version":2} with `messages` and `resume`), asked once and remembered: the status page and the admin API show it, and a
// handoff asks only when the answer is old. An app without the hooks (404, no proof support,
// anything else) is "no": it keeps today's behaviour. A backend that could not be asked is
// "unknown", asked again after a short while.
import { randomUUID } from 'node:crypto';
import type { HookAnswer, HookCall } from './handoff-calls.js';
import type { Backend } from './pool.js';

export type HookSupport = 'yes' | 'no' | 'unknown';

/** A "yes" or "no" is trusted this long (an app deploy may add or drop the hooks). */
export const HELLO_TTL_MS = 60_000;
/** An unreachable backend is asked again after this long, not on every page view. */
const UNKNOWN_TTL_MS = 5_000;

interface Known {
  readonly state: HookSupport;
  /** Its hello said version 2 with `messages`: it takes held messages (docs/handoff.md, version 2). */
  readonly messages: boolean;
  /** Its hello said `resume` too: it takes a resumed socket (implies `messages`). */
  readonly resume: boolean;
  readonly at: number;
}

export class HelloCache {
  private readonly known = new Map<string, Known>();
  private readonly asking = new Map<string, Promise<HookSupport>>();

  constructor(
    private readonly call: (backend: Backend, call: HookCall) => Promise<HookAnswer>,
    private readonly now: () => number,
  ) {}

  /** What is known now, without waiting; an old or missing answer is asked for in the background. */
  peek(backend: Backend): HookSupport {
    const k = this.known.get(backend.id);
    if (!this.fresh(k)) void this.ask(backend);
    return k?.state ?? 'unknown';
  }

  /**
   * Whether the backend takes held messages, as known now (a handoff asks right after its hello):
   * an old or missing answer is asked for in the background; until it comes, no.
   */
  takesMessages(backend: Backend): boolean {
    const k = this.known.get(backend.id);
    if (!this.fresh(k)) void this.ask(backend);
    return k?.state === 'yes' && k.messages;
  }

  /** Asks now, fresh answer or not (the gateway starts). */
  refresh(backend: Backend): Promise<HookSupport> {
    return this.ask(backend);
  }

  /**
   * Whether the backend's last answer said `resume`, without asking anything (an upgrade asks no
   * backend anything; a handoff, the status page and the admin API ask). A tunnel opened while
   * this is no is not made ready for a resume (its client reconnects through the `messages` way).
   */
  resumes(backend: Backend): boolean {
    const k = this.known.get(backend.id);
    return k?.state === 'yes' && k.resume;
  }

  /** The answer, asked now unless a fresh one is known. */
  async get(backend: Backend): Promise<HookSupport> {
    const k = this.known.get(backend.id);
    if (k !== undefined && this.fresh(k)) return k.state;
    return this.ask(backend);
  }

  private fresh(k: Known | undefined): k is Known {
    return k !== undefined && this.now() - k.at < (k.state === 'unknown' ? UNKNOWN_TTL_MS : HELLO_TTL_MS);
  }

  /** One question per backend at a time. */
  private ask(backend: Backend): Promise<HookSupport> {
    let p = this.asking.get(backend.id);
    if (p) return p;
    p = this.call(backend, { step: 'hello', id: randomUUID(), room: '', epoch: '', body: Buffer.alloc(0) })
      .then((a) => verdict(a))
      .then(({ state, messages, resume }) => {
        this.known.set(backend.id, { state, messages, resume, at: this.now() });
        return state;
      })
      .finally(() => this.asking.delete(backend.id));
    this.asking.set(backend.id, p);
    return p;
  }
}

type Verdict = { state: HookSupport; messages: boolean; resume: boolean };

const NO: Verdict = { state: 'no', messages: false, resume: false };

/**
 * 200 with {"version":1}, or {"version":2} (with `messages: true`: it takes held messages; with
 * `resume: true`: it takes resumed sockets, which implies messages): yes; any other answer: no;
 * no answer: unknown.
 */
function verdict(a: HookAnswer): Verdict {
  if (a.kind === 'timeout' || a.kind === 'unreachable') return { state: 'unknown', messages: false, resume: false };
  if (a.kind !== 'answer' || a.status !== 200) return NO;
  try {
    const v = JSON.parse(a.body.toString('utf8')) as unknown;
    if (typeof v !== 'object' || v === null) return NO;
    const { version, messages, resume } = v as { version?: unknown; messages?: unknown; resume?: unknown };
    if (version === 1) return { state: 'yes', messages: false, resume: false };
    // A resume that fails falls back to delivering the messages: `resume` says both.
    return version === 2 ? { state: 'yes', messages: messages === true || resume === true, resume: resume === true } : NO;
  } catch {
    return NO;
  }
}
