// The banner `start` prints once the demo listens (stderr; --json: one JSON line on stdout): the
// pages to open, the admin API, the demo backends, and the secrets generated for this run with a
// command that uses each.
import type { LoadedConfig } from '../config/load.js';
import { DEMO_ROOMS, type DemoBackends } from '../demo/demo-mode.js';
import { DEFAULT_ADMIN_URL } from './options.js';
import { print, say } from './output.js';

const ROOMS = DEMO_ROOMS;

const LOOPBACK_OR_ANY = new Set(['127.0.0.1', '::1', '0.0.0.0', '::', 'localhost']);

function hostForUrl(host: string, fallback: string): string {
  if (LOOPBACK_OR_ANY.has(host)) return fallback;
  return host.includes(':') ? `[${host}]` : host;
}

interface Addresses {
  readonly port: number;
  readonly adminPort: number | null;
}

export function showDemoBanner(demo: DemoBackends, config: LoadedConfig, addr: Addresses, source: { readonly file: string | undefined }, json: boolean): void {
  const base = `http://${hostForUrl(config.listen.host, 'localhost')}:${addr.port}`;
  const adminUrl = config.admin.enabled && addr.adminPort !== null ? `http://${hostForUrl(config.admin.host, '127.0.0.1')}:${addr.adminPort}` : null;
  const api = config.api.enabled;
  const [room, other, perTab] = ROOMS;
  const s = demo.secrets;
  // The commands as the user types them: --admin and --config only when they are not the defaults.
  const roomgate = (cmd: string, o: { admin?: boolean; config?: boolean }): string =>
    [
      'npx roomgate',
      cmd,
      o.admin && adminUrl !== null && adminUrl !== DEFAULT_ADMIN_URL ? `--admin ${adminUrl}` : '',
      o.config && source.file ? `--config ${source.file}` : '',
    ]
      .filter(Boolean)
      .join(' ');
  const commands = {
    where: roomgate(`where ${ROOMS.join(' ')}`, { admin: true, config: true }),
    sign: config.cookie.signed ? `ROOMGATE_COOKIE_SECRETS=${s.cookieSecret ?? '<your cookie secret>'} ${roomgate(`sign ${room}`, { config: true })}` : null,
    drain: adminUrl ? `ROOMGATE_ADMIN_TOKEN=${s.adminToken ?? '<your admin token>'} ${roomgate('drain demo-2', { admin: true })}` : null,
    apiWrite: api
      ? `curl -sS -X PUT -H 'Authorization: Bearer ${s.apiToken ?? '<your API token>'}' -H 'Content-Type: application/json' -d '{"title":"The ${room} room","status":"waiting"}' '${base}/_roomgate/api/rooms/${room}/meta?pinned=true'`
      : null,
    // docs/push.md: the game page shows what arrives; the answer counts the sockets it reached.
    push: `curl -sS -X POST -H 'Authorization: Bearer ${s.pushToken ?? '<your push token>'}' -H 'Content-Type: application/json' -H 'X-Roomgate-Sender: demo' -d '{"text":"hello from curl"}' '${base}/_roomgate/api/rooms/${room}/messages'`,
  };
  const pages = {
    index: `${base}/`,
    game: `${base}/game/${room}/`,
    anotherGame: `${base}/game/${other}/`,
    perTab: `${base}/r/${perTab}/game/${perTab}/`,
    lobby: api ? `${base}/_roomgate/lobby` : null,
    status: adminUrl ? `${adminUrl}/_roomgate/` : null,
    adminApi: adminUrl ? `${adminUrl}/backends` : null,
  };
  const backends = demo.backends.map((b) => ({ id: b.id, url: b.url, pid: b.process.pid ?? null }));
  if (json) {
    print(JSON.stringify({ event: 'demo', url: base, listen: config.listen.host, pages, adminUrl, backends, generated: s, commands }));
    return;
  }
  const row = (label: string, value: string | null): string | null => (value === null ? null : `  ${label.padEnd(17)} ${value}`);
  const anyGenerated = s.cookieSecret !== null || s.adminToken !== null || s.apiToken !== null || s.pushToken !== null;
  const lines = [
    '',
    `roomgate demo: ${base} in front of ${backends.length} demo backends${config.listen.host === '127.0.0.1' ? ' (this machine only)' : ` (listening on ${config.listen.host})`}`,
    row('start here:', pages.index),
    row('a game room:', pages.game),
    row('another room:', pages.anotherGame),
    row('a per-tab room:', pages.perTab),
    row('the lobby:', pages.lobby),
    row('the status page:', pages.status),
    row('the admin API:', pages.adminApi ? `${pages.adminApi}  (also /status, /rooms/ROOM, /lobby, /events, /metrics)` : null),
    row('where is a room:', commands.where),
    ...backends.map((b) => row(`backend ${b.id}:`, `${b.url} (pid ${b.pid})`)),
    anyGenerated ? 'Generated for this run because none is configured (set your own to keep them across restarts):' : 'Secrets: the configured ones:',
    row(s.cookieSecret ? 'cookie secret:' : 'sign a cookie:', commands.sign),
    row(s.adminToken ? 'admin token:' : 'drain a backend:', commands.drain),
    row(s.apiToken ? 'API token:' : 'write room data:', commands.apiWrite),
    row(s.pushToken ? 'push token:' : 'push to a room:', commands.push),
    `Open ${pages.game} and run the push command: the message appears on the page.`,
    `Kill a backend (kill PID) to watch its rooms reconnect to another. Ctrl-C stops everything.`,
    '',
  ];
  say(lines.filter((l): l is string => l !== null).join('\n'));
}
