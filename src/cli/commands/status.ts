// roomgate status: the running gateway's backends, one row each.
import { adminRequest, adminTarget, backendView, reportAdminError, type BackendView } from '../admin-client.js';
import { flag } from '../args.js';
import type { Command } from '../command.js';
import { ADMIN, JSON_OUT } from '../options.js';
import { deadlineText, formatFor, print, printJson, renderRows } from '../output.js';

interface BackendsAnswer {
  backends: Record<string, unknown>[];
  sockets?: number;
  rooms?: number;
  degraded?: boolean;
}

export const STATUS_COLUMNS = ['BACKEND', 'STATE', 'ROOMS', 'SOCKETS', 'HEALTH', 'DEADLINE'] as const;

export function statusRow(format: 'table' | 'plain', b: BackendView): (string | number | null)[] {
  return [b.id, b.removed ? `${b.state} (removed)` : b.state, b.rooms, b.sockets, b.health, deadlineText(format, b.deadline)];
}

export const status: Command = {
  name: 'status',
  args: '',
  minArgs: 0,
  maxArgs: 0,
  summary: "the running gateway's backends: state, rooms, sockets, health, deadline",
  description: `Asks the running gateway's admin API (GET /backends) and prints one row per backend:
  BACKEND  STATE  ROOMS  SOCKETS  HEALTH  DEADLINE
STATE is up, down, draining or maintenance; ROOMS are placed on it (all gateways), SOCKETS are this
gateway's live sockets there, HEALTH is its health checks' verdict, DEADLINE a drain's deadline.
In a pipe: the same columns, tab-separated, no header. --json: {"backends": [{"id", "url",
"weight", "state", "health", "rooms", "sockets", "deadline", "admin", "removed"}], "sockets",
"rooms", "degraded"}.`,
  options: [ADMIN, JSON_OUT],
  env: ['ROOMGATE_ADMIN_URL'],
  example: {
    line: 'status',
    output: `BACKEND  STATE  ROOMS  SOCKETS  HEALTH  DEADLINE
demo-1   up     0      0        up      -
demo-2   up     0      0        up      -
demo-3   up     0      0        up      -

this gateway: 0 live sockets in 0 rooms (http://127.0.0.1:9090)`,
  },
  async run({ values }) {
    const target = adminTarget(values);
    let answer: BackendsAnswer;
    try {
      answer = await adminRequest<BackendsAnswer>(target, '/backends');
    } catch (err) {
      return reportAdminError(err, 'status', 'status');
    }
    const backends = answer.backends.map(backendView);
    const format = formatFor(flag(values, 'json'));
    if (format === 'json') {
      printJson({ backends, sockets: answer.sockets ?? null, rooms: answer.rooms ?? null, degraded: answer.degraded ?? null });
      return 0;
    }
    let text = renderRows(format, STATUS_COLUMNS, backends.map((b) => statusRow(format, b)));
    if (format === 'table') {
      text += `\nthis gateway: ${answer.sockets ?? '?'} live sockets in ${answer.rooms ?? '?'} rooms${answer.degraded ? '; placement store DEGRADED (unreachable)' : ''} (${target.base})\n`;
    }
    print(text);
    return 0;
  },
};
