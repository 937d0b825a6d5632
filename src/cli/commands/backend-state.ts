// roomgate drain / undrain / maintenance BACKEND: change a backend's state on the running gateway
// (and every gateway sharing its store), then print one line: backend, new state, deadline.
import { adminRequest, adminTarget, backendView, reportAdminError } from '../admin-client.js';
import { flag, str, UsageError, type Values } from '../args.js';
import type { Command } from '../command.js';
import { ADMIN, DEADLINE, HANDOFF, JSON_OUT, TOKEN, WAIT } from '../options.js';
import { waitForDrain } from './drain-wait.js';
import { deadlineText, formatFor, print, printJson, renderRows } from '../output.js';

/** "90s", "10m", "1h", "1500ms" or plain milliseconds. */
export function parseDuration(s: string): number {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h)?$/.exec(s.trim());
  if (!m) throw new UsageError(`bad duration "${s}": use e.g. 90s, 10m, 1h`, 'see: roomgate drain --help');
  const unit = (m[2] ?? 'ms') as 'ms' | 's' | 'm' | 'h';
  return Math.round(Number(m[1]) * { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }[unit]);
}

type Action = 'drain' | 'undrain' | 'maintenance';

/**
 * The token sent: --token, else $ROOMGATE_ADMIN_TOKEN, else (drain and undrain only) the first of
 * $ROOMGATE_DRAIN_TOKENS, the variable a gateway reads its drain tokens from, so one Secret key
 * feeds the gateways and the backend pods alike (the first is the newest while rotating).
 */
export function tokenFor(action: Action, values: Values, env: NodeJS.ProcessEnv = process.env): string {
  const given = str(values, 'token') ?? (env.ROOMGATE_ADMIN_TOKEN || undefined);
  if (given !== undefined || action === 'maintenance') return given ?? '';
  return (env.ROOMGATE_DRAIN_TOKENS ?? '').split(',').map((t) => t.trim()).find((t) => t !== '') ?? '';
}

async function change(action: Action, backend: string, values: Values): Promise<number> {
  const handoff = action === 'drain' && flag(values, 'handoff');
  const deadlineMs = parseDuration(str(values, 'deadline') ?? '10m');
  const body = action === 'drain' ? { deadlineMs, ...(handoff ? { handoff: true } : {}) } : {};
  const token = tokenFor(action, values);
  let raw: Record<string, unknown>;
  try {
    raw = await adminRequest(adminTarget(values), `/backends/${encodeURIComponent(backend)}/${action}`, { method: 'POST', token, body });
  } catch (err) {
    return reportAdminError(err, `${action} ${backend}`, action);
  }
  const b = backendView(raw);
  const format = formatFor(flag(values, 'json'));
  if (handoff && flag(values, 'wait')) return waitForDrain(adminTarget(values), token, b.id, format, deadlineMs);
  if (format === 'json') printJson(b);
  else if (format === 'plain') print(renderRows('plain', [], [[b.id, b.state, b.deadline]]));
  else {
    const deadline = deadlineText('table', b.deadline);
    print(`${b.id} is now ${b.state === 'maintenance' ? 'in maintenance' : b.state}${deadline ? `; deadline ${deadline}` : ''}${handoff ? '; its live rooms are handed off now' : ''}`);
  }
  return 0;
}

const common = {
  args: 'BACKEND',
  minArgs: 1,
  maxArgs: 1,
  options: [ADMIN, TOKEN, JSON_OUT],
  env: ['ROOMGATE_ADMIN_URL', 'ROOMGATE_ADMIN_TOKEN'],
} as const;

const PRINTS = `Prints one line: the backend and its new state (the example below); in a pipe
BACKEND<TAB>STATE<TAB>DEADLINE (ISO time, or -); --json: the backend as in status --json.`;
const OUTPUT = `${PRINTS}
Needs the gateway's admin token (--token or $ROOMGATE_ADMIN_TOKEN).`;
const DRAIN_OUTPUT = `${PRINTS}
Needs the gateway's admin token (--token or $ROOMGATE_ADMIN_TOKEN) or, without one, a drain token
(the first of $ROOMGATE_DRAIN_TOKENS: admin.drainTokens, allowed to drain and undrain only, and by
default only from the backend's own address: a backend pod's preStop hook, docs/deployment.md).`;
const DRAIN_ENV = [...common.env, 'ROOMGATE_DRAIN_TOKENS'];

export const drain: Command = {
  ...common,
  name: 'drain',
  env: DRAIN_ENV,
  options: [ADMIN, TOKEN, DEADLINE, HANDOFF, WAIT, JSON_OUT],
  summary: 'no new rooms on BACKEND; its rooms stay until they empty or the deadline',
  description: `BACKEND takes no new rooms; its rooms keep their sockets until they empty, or until the deadline
(--deadline, default 10m), when their sockets are closed and the rooms placed elsewhere.
--handoff: its live rooms move now, a few at a time, each with its state (room handoff: the apps
serve the hooks, docs/handoff.md); a room whose handoff fails stays until the deadline.
The status page shows the handoffs; the drain is done when BACKEND holds no room.
--handoff --wait: waits until the drain has tried every room, then prints the rooms moved, failed
and left, and the sockets: resumed (kept open), reconnected, held messages delivered.
${DRAIN_OUTPUT}`,
  example: { line: 'drain demo-2', output: 'demo-2 is now draining; deadline 2026-12-03 07:50:04Z (in 10m 0s)' },
  run: ({ values, positionals }) => change('drain', positionals[0] as string, values),
};

export const undrain: Command = {
  ...common,
  name: 'undrain',
  env: DRAIN_ENV,
  summary: 'BACKEND takes new rooms again (after drain or maintenance)',
  description: `BACKEND is active again: it takes new rooms. Rooms placed elsewhere meanwhile stay there.
${DRAIN_OUTPUT}`,
  example: { line: 'undrain demo-2', output: 'demo-2 is now up' },
  run: ({ values, positionals }) => change('undrain', positionals[0] as string, values),
};

export const maintenance: Command = {
  ...common,
  name: 'maintenance',
  summary: 'no traffic at all to BACKEND: its rooms move now',
  description: `BACKEND gets no traffic at all: its rooms move to other backends at once (their sockets are
closed and reconnect there). For a restart after a drain.
${OUTPUT}`,
  example: { line: 'maintenance demo-2', output: 'demo-2 is now in maintenance' },
  run: ({ values, positionals }) => change('maintenance', positionals[0] as string, values),
};
