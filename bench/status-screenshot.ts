// docs/images/status-page-1280.png from a real run, never made-up data: a real gateway (the built
// dist/src/main.js) in front of two demo backends (processes, free ports, never 9090), six rooms
// opened by real WebSocket clients and some page requests, a real `move` handoff through the
// admin API (the client closed with 1012 and back on the new owner), then the admin port's status
// page in Debian's Chromium through playwright-core, 1280 px wide (and 390 px, a phone:
// docs/images/status-page-390.png), the whole page. It checks what
// it shows against the admin API before it writes the file (sockets in the summary and the
// backends table, the handoff row, the move's own event), and stops everything it started.
//
//   npm run build && node dist/bench/status-screenshot.js [directory, default docs/images]
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import WebSocket from 'ws';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const OUT_DIR = process.argv[2] ?? join(ROOT, 'docs/images');
const TOKEN = 'status-screenshot-admin-token-0123456789';
const CALL_SECRET = 'status-screenshot-call-secret-0123456789';
const ROOMS = ['chess', 'poker', 'tetris', 'go', 'bridge', 'checkers'];
const STEP_MS = 5_000;

const children: ChildProcess[] = [];
const sockets = new Set<WebSocket>();

/** A child process of this script, and the first stdout line of JSON that `ready` accepts. */
function start(args: string[], env: Record<string, string>, ready: (o: Record<string, unknown>) => boolean): Promise<Record<string, unknown>> {
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'], env: { PATH: process.env.PATH ?? '', ...env } });
  children.push(child);
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${args[0]} did not start within 30 s`)), 30_000);
    child.once('exit', (code) => reject(new Error(`${args[0]} exited (${code})`)));
    createInterface({ input: child.stdout! }).on('line', (line) => {
      try {
        const o = JSON.parse(line) as Record<string, unknown>;
        if (!ready(o)) return;
        clearTimeout(timer);
        resolve(o);
      } catch {
        // not a log line
      }
    });
  });
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** A room's socket through the gateway, mounted: the backend it is on, and its close code. */
function joinRoom(port: number, room: string): Promise<{ backend: string; closed: Promise<number> }> {
  const ws = new WebSocket(`ws://127.0.0.1:${port}/ws/live/?room=${room}`, { handshakeTimeout: 10_000 });
  sockets.add(ws);
  const closed = new Promise<number>((r) => ws.once('close', (code) => r(code)));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`room ${room} not mounted within 10 s`)), 10_000);
    ws.once('error', reject);
    ws.on('message', (data) => {
      const msg = JSON.parse(String(data)) as { type: string; backend?: string };
      if (msg.type === 'connect') ws.send(JSON.stringify({ type: 'mount', url: `/game/${room}/` }));
      if (msg.type === 'mounted') {
        clearTimeout(timer);
        resolve({ backend: String(msg.backend), closed });
      }
    });
  });
}

async function admin(adminPort: number, path: string, body?: unknown): Promise<Record<string, unknown>> {
  const res = await fetch(`http://127.0.0.1:${adminPort}${path}`, {
    method: body === undefined ? 'GET' : 'POST',
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    signal: AbortSignal.timeout(15_000),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`${path}: ${res.status} ${text}`);
  return JSON.parse(text) as Record<string, unknown>;
}

/** Page requests through the gateway, so the pages plot has something. */
async function browse(port: number, n: number): Promise<void> {
  for (let i = 0; i < n; i++) await (await fetch(`http://127.0.0.1:${port}/game/${ROOMS[i % ROOMS.length]}/`, { signal: AbortSignal.timeout(5_000) })).text();
}

async function run(dir: string): Promise<void> {
  const backend = join(ROOT, 'dist/examples/demo-backend/server.js');
  const urls: string[] = [];
  for (const id of ['b1', 'b2']) {
    const line = await start([backend, '--port', '0', '--host', '127.0.0.1', '--id', id], { ROOMGATE_CALL_SECRETS: CALL_SECRET }, (o) => o.event === 'listening');
    urls.push(`${id}=http://127.0.0.1:${String(line.port)}`);
  }
  const config = join(dir, 'roomgate.yaml');
  writeFileSync(config, JSON.stringify({ admin: { token: TOKEN }, backendCalls: { secrets: [CALL_SECRET] }, placement: { boundedLoadFactor: 0 } }));
  const env = { ROOMGATE_ADMIN_PORT: '0', ROOMGATE_HOST: '127.0.0.1', ROOMGATE_COOKIE_SECRETS: 'status-screenshot-cookie-secret-0123456789' };
  const gw = await start([join(ROOT, 'dist/src/main.js'), 'start', '--port', '0', '--config', config, ...urls.flatMap((u) => ['--backend', u])], env, (o) => o.msg === 'listening');
  const port = Number(gw.port);
  const adminPort = Number(gw.adminPort);

  const clients = new Map<string, { backend: string; closed: Promise<number> }>();
  for (const room of ROOMS) clients.set(room, await joinRoom(port, room));
  // Two samples of traffic (rates need two), then the move, then one more sample after it.
  for (let i = 0; i < 2; i++) {
    await browse(port, 20);
    await sleep(STEP_MS);
  }
  const room = ROOMS[0] as string;
  const from = clients.get(room)!.backend;
  const to = from === 'b1' ? 'b2' : 'b1';
  const moved = (await admin(adminPort, `/rooms/${room}/move`, { to })) as { handoff: { result: string } };
  if (moved.handoff.result !== 'moved') throw new Error(`the move: ${JSON.stringify(moved)}`);
  const code = await Promise.race([clients.get(room)!.closed, sleep(10_000).then(() => -1)]);
  if (code !== 1012) throw new Error(`the room's socket closed with ${code}, not 1012`);
  clients.set(room, await joinRoom(port, room));
  if (clients.get(room)!.backend !== to) throw new Error(`the room came back on ${clients.get(room)!.backend}, not ${to}`);
  await browse(port, 20);
  await sleep(2 * STEP_MS);
  await check(adminPort, room, from, to);
  await screenshot(adminPort);
}

/** What the page will show, checked against the admin API: the socket count, the handoff, its own event. */
async function check(adminPort: number, room: string, from: string, to: string): Promise<void> {
  const status = (await admin(adminPort, '/status')) as Record<string, unknown>;
  const events = (await admin(adminPort, '/events')) as { events: { kind: string; backend: string; roomsMoved: number }[]; handoffs: { recent: { room: string; result: string }[] } };
  const handoff = events.handoffs.recent.find((h) => h.room === room);
  if (handoff?.result !== 'moved') throw new Error(`no moved handoff of ${room}: ${JSON.stringify(events.handoffs)}`);
  const own = events.events.find((e) => e.kind === 'handoff' && e.backend === from);
  if (own?.roomsMoved !== 1) throw new Error(`the move is not its own event: ${JSON.stringify(events.events)}`);
  if (events.events.some((e) => e.kind === 'joined' && e.roomsMoved > 0)) throw new Error('a move was credited to a joined event');
  console.log(`checked: ${room} moved ${from} -> ${to}; status ${JSON.stringify(status).slice(0, 300)}`);
}

async function screenshot(adminPort: number): Promise<void> {
  const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'], timeout: 30_000 });
  try {
    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    await page.goto(`http://127.0.0.1:${adminPort}/_roomgate/`, { timeout: 15_000 });
    await page.locator('#live', { hasText: /^Live:/ }).waitFor({ timeout: 15_000 });
    // The summary and the backends table must agree (the old screenshot did not).
    const summary = Number(await page.locator('#sockets').textContent());
    const table = (await page.locator('#backends tbody td[data-label="Sockets"] .val').allTextContents()).reduce((n, v) => n + Number(v), 0);
    if (summary !== ROOMS.length || table !== summary) throw new Error(`sockets: summary ${summary}, table ${table}, expected ${ROOMS.length}`);
    for (const width of [1280, 390]) {
      const out = join(OUT_DIR, `status-page-${width}.png`);
      await page.setViewportSize({ width, height: 900 });
      await page.screenshot({ path: out, fullPage: true });
      console.log(`wrote ${out}`);
    }
  } finally {
    await browser.close();
  }
}

const dir = mkdtempSync(join(tmpdir(), 'roomgate-status-screenshot-'));
try {
  await run(dir);
} finally {
  for (const ws of sockets) ws.terminate();
  await Promise.all(
    children.map(
      (c) =>
        new Promise<void>((resolve) => {
          if (c.exitCode !== null || c.signalCode !== null) return resolve();
          const kill = setTimeout(() => c.kill('SIGKILL'), 5_000);
          c.once('exit', () => {
            clearTimeout(kill);
            resolve();
          });
          c.kill('SIGTERM');
        }),
    ),
  );
  rmSync(dir, { recursive: true, force: true });
}
