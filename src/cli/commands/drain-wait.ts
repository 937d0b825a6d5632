// `roomgate drain BACKEND --handoff --wait`: follows the drain's handoff progress on the gateway's
// admin port (GET /events, handoffs.drains) until it is done, then prints what became of the
// backend's rooms and of this gateway's sockets in them: resumed (kept open on the new owner),
// reconnected, and the held messages the new owners took. Exit 0 when every room moved, 1 when
// some failed or are left (they stay until the drain's deadline).
import { adminRequest, reportAdminError, type AdminTarget } from '../admin-client.js';
import { print, printJson, sayError, type Format } from '../output.js';

/** A drain's progress as GET /events shows it (src/runtime/handoff-drain.ts). */
interface DrainSeen {
  readonly backend: string;
  readonly moved: number;
  readonly failed: number;
  readonly left: number;
  readonly sockets: { readonly resumed: number; readonly reconnected: number; readonly messages: number };
  readonly done: boolean;
  readonly reason?: string;
}

/** How often the progress is read. */
const POLL_MS = 250;

function plural(n: number, one: string): string {
  return `${n} ${one}${n === 1 ? '' : 's'}`;
}

/** The one line printed once the drain is done. */
export function drainSummary(d: DrainSeen): string {
  const rooms = `${plural(d.moved, 'room')} moved, ${d.failed} failed, ${d.left} left`;
  const s = d.sockets;
  const sockets = `sockets: ${s.resumed} resumed, ${s.reconnected} reconnected; ${plural(s.messages, 'held message')} delivered`;
  return `${d.backend} drained with handoff: ${rooms}; ${sockets}${d.reason ? ` (${d.reason})` : ''}`;
}

/** Waits at most `limitMs` (the drain's deadline: past it the rooms left are closed anyway). */
export async function waitForDrain(target: AdminTarget, token: string, backend: string, format: Format, limitMs: number, pollMs = POLL_MS): Promise<number> {
  const until = Date.now() + limitMs;
  for (;;) {
    let seen: DrainSeen | undefined;
    try {
      const ev = await adminRequest<{ handoffs?: { drains?: DrainSeen[] } }>(target, '/events', { token });
      seen = ev.handoffs?.drains?.find((d) => d.backend === backend);
    } catch (err) {
      return reportAdminError(err, `drain ${backend} --wait`, 'drain');
    }
    if (seen?.done === true) {
      if (format === 'json') printJson(seen);
      else print(drainSummary(seen));
      return seen.failed === 0 && seen.left === 0 ? 0 : 1;
    }
    if (Date.now() >= until) {
      sayError(`drain ${backend} --wait: its handoffs were still running at the deadline`, 'hint: roomgate status, or the status page, shows the drain');
      return 1;
    }
    await new Promise((resolve) => setTimeout(resolve, pollMs));
  }
}
