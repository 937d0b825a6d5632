// roomgate move ROOM --to BACKEND: moves one room to another backend now, with its state (room
// handoff, docs/handoff.md), through the running gateway's admin API; prints what became
// of it. The apps must serve the handoff hooks; a room whose move fails stays where it was.
import { AdminRefused, adminRequest, adminTarget, reportAdminError } from '../admin-client.js';
import { flag, str, UsageError, type Values } from '../args.js';
import type { Command } from '../command.js';
import { ADMIN, HANDOFF_ID, JSON_OUT, TO, TOKEN } from '../options.js';
import { formatFor, print, printJson, renderRows, sayError } from '../output.js';

export interface Handoff {
  readonly id: string;
  readonly room: string;
  readonly from: string | null;
  readonly to: string | null;
  readonly result: string;
  readonly release: string | null;
  readonly bytes: number | null;
  readonly ms: number | null;
  /** Version 2: this gateway's sockets of the room, how many stayed open, the held messages delivered. */
  readonly held?: { readonly sockets: number; readonly resumed: number; readonly messages: number; readonly lostSockets: number };
  /** How long each step took (ms), as the gateway timed them. */
  readonly steps?: Readonly<Record<string, number>>;
}

/** " (hold 3, export 4, ... ms)": where the time went, or '' when the record has no steps. */
function stepsText(h: Handoff): string {
  const s = Object.entries(h.steps ?? {});
  return s.length === 0 ? '' : ` (${s.map(([k, ms]) => `${k} ${ms}`).join(', ')} ms)`;
}

/** What became of the room's sockets (version 2), or '' when none were held. */
function socketsText(h: Handoff): string {
  const s = h.held;
  if (s === undefined) return '';
  const lost = s.lostSockets > 0 ? `, the messages of ${s.lostSockets} lost` : '';
  return `; sockets: ${s.resumed} resumed, ${s.sockets - s.resumed} reconnected; ${s.messages} held message${s.messages === 1 ? '' : 's'} delivered${lost}`;
}

/** The line a terminal gets. */
export function sentence(h: Handoff): string {
  const state = h.result === 'moved' ? `with its state (${h.bytes ?? 0} bytes)` : 'with no state to hand over (the old owner held none)';
  const cut = h.release === 'cut' ? '; the old owner did not release it, its sockets were cut' : '';
  return `${h.room} moved from ${h.from ?? '-'} to ${h.to ?? '-'} ${state} in ${h.ms ?? 0} ms${stepsText(h)}${cut}${socketsText(h)}`;
}

async function run(room: string, values: Values): Promise<number> {
  const to = str(values, 'to');
  if (to === undefined || to === '') throw new UsageError('move needs --to BACKEND', 'see: roomgate move --help');
  const id = str(values, 'id');
  const token = str(values, 'token') ?? process.env.ROOMGATE_ADMIN_TOKEN ?? '';
  let h: Handoff;
  try {
    const body = { to, ...(id === undefined ? {} : { id }) };
    h = (await adminRequest<{ handoff: Handoff }>(adminTarget(values), `/rooms/${encodeURIComponent(room)}/move`, { method: 'POST', token, body })).handoff;
  } catch (err) {
    // A room no client has opened has nothing to move: the generic 404 hint is about backend ids.
    if (err instanceof AdminRefused && err.status === 404 && err.message.includes('not live')) {
      sayError(`move ${room}: ${err.message}`, 'hint: a room is live once a client opens it; roomgate where ROOM says where it is');
      return 2;
    }
    return reportAdminError(err, `move ${room}`, 'move');
  }
  const format = formatFor(flag(values, 'json'));
  if (format === 'json') printJson(h);
  else if (format === 'plain') print(renderRows('plain', [], [[h.room, h.from, h.to, h.result, h.release, h.ms]]));
  else print(sentence(h));
  return 0;
}

export const move: Command = {
  name: 'move',
  args: 'ROOM',
  minArgs: 1,
  maxArgs: 1,
  options: [TO, HANDOFF_ID, ADMIN, TOKEN, JSON_OUT],
  env: ['ROOMGATE_ADMIN_URL', 'ROOMGATE_ADMIN_TOKEN'],
  summary: 'move ROOM to another backend now, with its state (room handoff)',
  description: `ROOM moves to --to BACKEND now: its old backend hands its state over (export), the new one
takes it (import), the placement follows, and the old backend closes the room's sockets, which
reconnect to the new one (or, where the apps resume, stay open: the line then says how many
sockets were resumed and reconnected and how many held messages were delivered). Both apps must
serve the handoff hooks (docs/handoff.md). Any
failure before the placement moves leaves the room where it was, with its state; the error says why.
Prints one line: ROOM<TAB>FROM<TAB>TO<TAB>RESULT<TAB>RELEASE<TAB>MS in a pipe; --json: the handoff.
Exit code 0 when the room moved, 1 when it did not (refused or rolled back), 2 for a wrong ROOM or BACKEND.
Needs the gateway's admin token (--token or $ROOMGATE_ADMIN_TOKEN).`,
  // Against the demo with no room live: the refusal a room no client has opened gets.
  example: {
    line: 'move lobby --to demo-2',
    output: 'roomgate: move lobby: 404 the room has no placement: it is not live anywhere\nhint: a room is live once a client opens it; roomgate where ROOM says where it is',
  },
  run: ({ values, positionals }) => run(positionals[0] as string, values),
};
