// roomgate where ROOM...: where each room IS on the running gateway, and why (GET /rooms/ROOM on
// its admin API). With no gateway answering, --offline or --backend: the ring owner a NEW room
// would get, said as such (a live room may be elsewhere: bounded loads, moves, failovers).
import { AdminRefused, AdminUnreachable, adminRequest, adminTarget, reportAdminError, type AdminTarget } from '../admin-client.js';
import { flag, list } from '../args.js';
import type { Command } from '../command.js';
import { ADMIN, BACKEND, CONFIG, JSON_OUT, OFFLINE } from '../options.js';
import { formatFor, print, printJson, renderRows, say, type Cell } from '../output.js';
import type { Failed, Placed, Row } from './where-ring.js';

const CONCURRENCY = 8;

async function mapLimit<T, R>(items: readonly T[], limit: number, fn: (t: T) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i] as T);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return out;
}

/** Asks the gateway; `unreachable` when nothing answers at the admin URL (the caller falls back to the ring). */
async function askGateway(target: AdminTarget, rooms: readonly string[]): Promise<{ rows: Row[] } | { unreachable: AdminUnreachable }> {
  let urls: Map<string, string>;
  try {
    const answer = await adminRequest<{ backends: { id: string; url?: string }[] }>(target, '/backends');
    urls = new Map(answer.backends.map((b) => [b.id, b.url ?? '']));
  } catch (err) {
    if (err instanceof AdminUnreachable) return { unreachable: err };
    throw err;
  }
  const rows = await mapLimit(rooms, CONCURRENCY, async (room): Promise<Row> => {
    if (room === '') return { room, error: 'invalid room key: it is empty', code: 2 };
    try {
      const a = await adminRequest<{ backend: string | null; reason: string; placement: { backend: string; epoch: number } | null; wouldPlace?: boolean; socketsHere?: number }>(
        target,
        `/rooms/${encodeURIComponent(room)}`,
      );
      return {
        room,
        backend: a.backend,
        url: a.backend === null ? null : (urls.get(a.backend) ?? null),
        reason: a.reason,
        placement: a.placement ? { backend: a.placement.backend, epoch: a.placement.epoch } : null,
        wouldPlace: a.wouldPlace === true,
        socketsHere: a.socketsHere ?? 0,
        source: 'gateway',
      };
    } catch (err) {
      if (err instanceof AdminRefused) return { room, error: err.status === 400 ? err.detail : err.message, code: err.status === 400 ? 2 : 1 };
      if (err instanceof AdminUnreachable) return { room, error: err.message, code: 1 };
      throw err;
    }
  });
  return { rows };
}

const ON_RING: Readonly<Record<string, string>> = {
  ring: 'the ring owner',
  'ring-skip': 'next on the ring: the owner takes no new rooms',
  'bounded-skip': 'next on the ring: the owner is at its bounded-load share',
  'no-room': 'least loaded',
};

/** The WHY column: the reason in words. */
export function why(r: Placed): string {
  if (r.source === 'ring') return `a NEW room goes here (${ON_RING[r.reason] ?? r.reason})`;
  if (r.backend === null) return r.reason === 'room-busy' ? 'its placement is changing on another gateway: 503, retry' : 'no backend can take it now: 503';
  if (!r.wouldPlace) {
    if (r.reason === 'sticky') return 'placed here; stays while the backend is up';
    if (r.reason === 'sticky-live') return "placed here; the backend fails its health checks, but this gateway's live sockets of the room are there";
    return r.reason;
  }
  const how = ON_RING[r.reason] ?? r.reason;
  if (r.placement === null) return `not placed yet: its first request places it here (${how})`;
  return `placed on ${r.placement.backend}, which cannot take it now: its next request moves it here (${how})`;
}

function printRows(format: 'table' | 'plain', rows: readonly Row[]): void {
  if (format === 'plain') {
    // ROOM BACKEND URL REASON EPOCH SOCKETS_HERE, or ROOM "error: ..."
    print(rows.map((r) => ('error' in r ? `${r.room}\terror: ${r.error}\n` : renderRows('plain', [], [[r.room, r.backend, r.url, r.reason, r.placement?.epoch, r.socketsHere]]))).join(''));
    return;
  }
  const live = rows.some((r) => 'source' in r && r.source === 'gateway');
  const cells = rows.map((r): Cell[] => {
    if ('error' in r) return live ? [r.room, null, null, null, `error: ${r.error}`] : [r.room, null, null, `error: ${r.error}`];
    return live ? [r.room, r.backend, r.placement?.epoch, r.socketsHere, why(r)] : [r.room, r.backend, r.url, why(r)];
  });
  print(renderRows('table', live ? ['ROOM', 'BACKEND', 'EPOCH', 'SOCKETS HERE', 'WHY'] : ['ROOM', 'BACKEND', 'URL', 'WHY'], cells));
}

export const where: Command = {
  name: 'where',
  args: 'ROOM [ROOM...]',
  minArgs: 1,
  maxArgs: Infinity,
  summary: 'where each room is on the running gateway, and why',
  description: `Asks the running gateway's admin API (GET /rooms/ROOM) where each room IS and why: its backend,
the reason (sticky: placed there; ring, ring-skip, bounded-skip: not placed yet, its first
request places it there), its placement epoch and this gateway's live sockets of it.
When no gateway answers at the admin URL, or with --offline or --backend, the answer is the
ring owner a NEW room would get with every backend up, and a note on stderr says so.
An invalid room key is reported like the admin API does (exit 2).
In a pipe: ROOM BACKEND URL REASON EPOCH SOCKETS_HERE, tab-separated ("-" when unknown), or
ROOM<TAB>error: MESSAGE. --json: [{"room", "backend", "url", "reason", "placement": {"backend",
"epoch"} | null, "wouldPlace", "socketsHere", "source": "gateway" | "ring"} | {"room", "error"}].`,
  options: [ADMIN, OFFLINE, CONFIG, BACKEND, JSON_OUT],
  // The ring's answer uses the backends (the demo's when none: their base port) from the configuration.
  env: ['ROOMGATE_ADMIN_URL', 'ROOMGATE_CONFIG', 'ROOMGATE_BACKENDS', 'ROOMGATE_DEMO_BASE_PORT'],
  example: {
    line: 'where chess',
    output: `ROOM   BACKEND  EPOCH  SOCKETS HERE  WHY
chess  demo-3   -      0             not placed yet: its first request places it here (the ring owner)`,
  },
  async run({ values, positionals: rooms }) {
    // The configuration, and with it the schema and the ring, is loaded only when the ring answers.
    const ringOwners = async (): Promise<Row[]> => (await import('./where-ring.js')).ringOwners(values, rooms);
    let rows: Row[];
    const offlineReason = flag(values, 'offline') ? '--offline' : list(values, 'backend') ? '--backend given' : null;
    if (offlineReason) {
      rows = await ringOwners();
      say(`note: ${offlineReason}: the ring owner a NEW room would get (every backend up); a live room may be elsewhere`);
    } else {
      const target = adminTarget(values);
      let asked: Awaited<ReturnType<typeof askGateway>>;
      try {
        asked = await askGateway(target, rooms);
      } catch (err) {
        return reportAdminError(err, 'where', 'where');
      }
      if ('rows' in asked) rows = asked.rows;
      else {
        rows = await ringOwners();
        const e = asked.unreachable;
        say(`note: no gateway answered at ${e.base} (${e.reason}): this is the ring owner a NEW room would get; a live room may be elsewhere (--admin URL asks a gateway)`);
      }
    }
    const format = formatFor(flag(values, 'json'));
    if (format === 'json') printJson(rows.map((r) => ('error' in r ? { room: r.room, error: r.error } : r)));
    else printRows(format, rows);
    const failed = rows.filter((r): r is Failed => 'error' in r);
    return failed.some((r) => r.code === 2) ? 2 : failed.length > 0 ? 1 : 0;
  },
};
