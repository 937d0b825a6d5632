/**
 * The bench backend: a lean single-process room server (the `ws` package), like a djust process
 * with rooms in memory, but with nothing in it that is not the workload.
 *
 *   node dist/bench/suite/backend.js --id b1 [--port 0] [--host 127.0.0.1]
 *
 * Prints one line `{"event":"listening","id":"b1","port":N}` on stdout, then serves:
 *   GET /healthz           200 ok
 *   GET /_bench/stats      {id, sockets, rooms, received}
 *   POST /_roomgate/handoff/hello  {"version":2,"messages":true}: a version-2 app (roomgate then
 *                          follows its tunnels when its calls are signed; proofs are not checked)
 *   GET anything else      a 10 KB HTML page (keep-alive)
 *   Upgrade on /ws/live/   joins the room named by the `room` cookie (else ?room=), sends
 *                          `W <id> <room>` at once; sockets with ?idle=1 get no broadcasts
 * Every game room (one with a socket without ?idle=1) gets a 140-byte broadcast frame with the
 * send time 5 times a second, each room at its own phase. Client frames are only counted.
 * Exits when its stdin closes (the orchestrator died or is done) or on SIGTERM.
 */
import http from 'node:http';
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { parseArgs } from 'node:util';
import { WebSocket, WebSocketServer } from 'ws';
import { BROADCAST_BYTES, BROADCAST_HZ, PAGE_BYTES, WS_PATH, formatTs, padTo, wallMs } from './protocol.js';
import { Ticker } from './ticker.js';

interface Room {
  readonly name: string;
  readonly members: Set<WebSocket>;
  /** Members that want broadcasts (not ?idle=1). */
  game: number;
  seq: number;
}

const { values } = parseArgs({
  options: { id: { type: 'string' }, port: { type: 'string', default: '0' }, host: { type: 'string', default: '127.0.0.1' } },
});
const id = values.id ?? 'b1';

const rooms = new Map<string, Room>();
let sockets = 0;
let received = 0;

const PAGE_TAIL = '--></main></body></html>\n';
const page = Buffer.from(
  padTo(`<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>bench page (${id})</title></head><body><main><h1>Room page</h1><p>Served by ${id}.</p><!--`, PAGE_BYTES - PAGE_TAIL.length) + PAGE_TAIL,
  'latin1',
);

// A broadcast is framed once per room (a 140-byte text frame: FIN+text, 16-bit length) and the
// same bytes are written to each member's socket, as a server that fans out one update does;
// ws.send would frame it again for every member. Nothing else is ever queued on these sockets
// (no compression), so the frames cannot interleave with ws's own writes.
const HEADER = Buffer.from([0x81, 126, BROADCAST_BYTES >> 8, BROADCAST_BYTES & 0xff]);
const ticker = new Ticker<Room>(1000 / BROADCAST_HZ, (room) => {
  room.seq++;
  const frame = Buffer.allocUnsafe(HEADER.length + BROADCAST_BYTES);
  HEADER.copy(frame, 0);
  frame.write(padTo(`B ${formatTs(wallMs())} ${room.name} ${room.seq} `, BROADCAST_BYTES), HEADER.length, 'latin1');
  for (const ws of room.members) {
    if (ws.readyState === WebSocket.OPEN) (ws as unknown as { _socket: Duplex })._socket.write(frame);
  }
});

function cookieValue(header: string | undefined, name: string): string | null {
  if (!header) return null;
  const m = new RegExp(`(?:^|;\\s*)${name}=([^;]*)`).exec(header);
  return m?.[1] ? m[1].trim() : null;
}

const wss = new WebSocketServer({ noServer: true, clientTracking: false, maxPayload: 64 * 1024, skipUTF8Validation: true });

wss.on('connection', (ws: WebSocket, req: IncomingMessage) => {
  const url = req.url ?? '/';
  const q = url.indexOf('?');
  const query = new URLSearchParams(q < 0 ? '' : url.slice(q + 1));
  const name = cookieValue(req.headers.cookie, 'room') ?? query.get('room') ?? '-';
  const idle = query.get('idle') === '1';
  let room = rooms.get(name);
  if (!room) rooms.set(name, (room = { name, members: new Set(), game: 0, seq: 0 }));
  const r = room;
  r.members.add(ws);
  if (!idle && ++r.game === 1) ticker.add(r);
  sockets++;
  ws.on('message', () => {
    received++;
  });
  ws.on('error', () => undefined);
  ws.once('close', () => {
    sockets--;
    r.members.delete(ws);
    if (!idle && --r.game === 0) ticker.delete(r);
    if (r.members.size === 0) rooms.delete(r.name);
  });
  ws.send(`W ${id} ${name}`);
});

/** roomgate's hello answered as an app of handoff protocol version 2 that takes held messages. */
const HELLO = '{"version":2,"messages":true}';

const server = http.createServer((req, res) => {
  req.resume();
  const path = req.url ?? '/';
  if (path === '/healthz') {
    res.writeHead(200, { 'Content-Type': 'text/plain', 'Content-Length': 3 });
    res.end('ok\n');
  } else if (req.method === 'POST' && path === '/_roomgate/handoff/hello') {
    res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': HELLO.length });
    res.end(HELLO);
  } else if (path === '/_bench/stats') {
    const body = JSON.stringify({ id, sockets, rooms: rooms.size, received });
    res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) });
    res.end(body);
  } else {
    res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8', 'Content-Length': page.length, 'Cache-Control': 'no-store', 'X-Backend-Id': id });
    res.end(page);
  }
});
// Proxies keep idle connections to their backends (nginx `keepalive`, HAProxy reuse, roomgate's
// agent): do not close them under their feet during a run.
server.keepAliveTimeout = 300_000;
server.headersTimeout = 301_000;
server.maxHeadersCount = 200;

server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
  socket.on('error', () => socket.destroy());
  if (!(req.url ?? '').startsWith(WS_PATH)) {
    socket.end('HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n');
    return;
  }
  wss.handleUpgrade(req, socket, head, (ws) => wss.emit('connection', ws, req));
});

server.listen(Number(values.port), values.host, () => {
  const addr = server.address();
  const port = typeof addr === 'object' && addr ? addr.port : 0;
  process.stdout.write(`${JSON.stringify({ event: 'listening', id, port })}\n`);
});

const stop = (): void => process.exit(0);
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
process.stdin.on('end', stop);
process.stdin.on('error', stop);
process.stdin.resume();
