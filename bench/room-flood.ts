/**
 * A flood of distinct room keys against one gateway (issue 26 item 4): how much does it keep?
 *
 *   npm run build && node dist/bench/room-flood.js [--rooms 100000] [--seconds 60]
 *       [--connections 32] [--max-idle-rooms N] [--redis] [--distinct N] [--config JSON]
 *
 * The gateway runs alone in a child process (this file with --serve, started with roomgate's Node
 * flags and --expose-gc), with the memory store or (--redis) a local redis-server the bench starts
 * (no persistence); a one-line backend runs in this process. This process sends page requests
 * `GET /r/<key>/` with a new key each, on keep-alive connections, paced to --rooms within
 * --seconds. The child's RSS and heap are read after a full collection (three last-resort
 * collections, asked over IPC: V8 then also unmaps the pages it freed) once warmed up (as many requests as the flood, on 100 keys, unpaced) and again after
 * the flood; their difference is what the flood left behind. With --redis, Redis's used_memory
 * before and after and its key count (INFO, DBSIZE) give bytes per kept placement. Also prints
 * roomgate_idle_rooms_evicted_total. --max-idle-rooms overrides placement.maxIdleRooms (10000000:
 * no cap, the behaviour before it); --distinct N sends as many requests on N keys only (the control
 * run: what the same traffic leaves behind without new rooms); --config adds configuration (JSON).
 * Asserts nothing; figures go to docs/placement.md.
 */
import { fork, type ChildProcess } from 'node:child_process';
import http from 'node:http';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import { loadConfig } from '../src/config/load.js';
import { startRedisServer, type LocalRedis } from '../src/demo/redis-server.js';
import { stopChild } from '../src/demo/child.js';
import { Gateway } from '../src/gateway.js';
import { createLogger } from '../src/observability/logger.js';
import { NODE_FLAGS } from '../src/node-flags.js';

const say = (line = ''): boolean => process.stdout.write(`${line}\n`);
const MB = 1024 * 1024;

const { values } = parseArgs({
  options: {
    rooms: { type: 'string', default: '100000' },
    seconds: { type: 'string', default: '60' },
    connections: { type: 'string', default: '32' },
    'max-idle-rooms': { type: 'string' },
    redis: { type: 'boolean', default: false },
    /** The control run: as many requests, on this few distinct keys (no room state to keep). */
    distinct: { type: 'string' },
    /** More configuration (JSON, top-level sections replaced), e.g. '{"proxy":{"leanPages":false}}'. */
    config: { type: 'string' },
    serve: { type: 'string' },
  },
});
const ROOMS = Number(values.rooms);
const SECONDS = Number(values.seconds);
const CONNECTIONS = Number(values.connections);
/** The warm-up: as many requests as the flood, at full speed, on this few rooms (code, buffers and pools warm; no room state). */
const WARM_ROOMS = 100;

interface Figures {
  rss: number;
  heap: number;
  heapTotal: number;
  external: number;
  /** From /proc/self/status: RSS of anonymous memory (heap, malloc) and of mapped files (the node binary's code). */
  rssAnon: number;
  rssFile: number;
  evictions: string;
}

/** The child: the gateway alone; answers 'measure' with its memory after a full collection. */
async function serve(configJson: string): Promise<void> {
  // V8's gc() with options: 'last-resort' is the full collection that also gives pooled pages
  // back (what V8 does under memory pressure); a plain gc() leaves freed pages mapped.
  const gc = (globalThis as { gc?: (o?: { type: string; execution: string; flavor: string }) => void }).gc;
  if (!gc) throw new Error('the child runs with --expose-gc');
  const dir = mkdtempSync(join(tmpdir(), 'room-flood-'));
  const file = join(dir, 'gateway.json');
  writeFileSync(file, configJson);
  const config = loadConfig({ env: {}, file });
  rmSync(dir, { recursive: true, force: true });
  const gateway = new Gateway(config, { logger: createLogger('silent') });
  await gateway.start();
  process.on('message', (msg: string) => {
    if (msg === 'measure') {
      void (async () => {
        for (let i = 0; i < 3; i++) gc({ type: 'major', execution: 'sync', flavor: 'last-resort' });
        const m = process.memoryUsage();
        const status = readFileSync('/proc/self/status', 'utf8');
        const kb = (name: string): number => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN) * 1024;
        process.send!({ rss: m.rss, heap: m.heapUsed, heapTotal: m.heapTotal, external: m.external + m.arrayBuffers, rssAnon: kb('RssAnon'), rssFile: kb('RssFile'), evictions: await evictions(gateway) } satisfies Figures);
      })();
    } else if (msg === 'stop') {
      void gateway.stop().then(() => process.exit(0));
    }
  });
  process.send!({ port: gateway.port, maxIdleRooms: config.placement.maxIdleRooms, idleTtlMs: config.placement.idleTtlMs });
}

function startChild(config: Record<string, unknown>): Promise<{ child: ChildProcess; port: number; maxIdleRooms: number; idleTtlMs: number }> {
  const child = fork(process.argv[1]!, ['--serve', JSON.stringify(config)], { execArgv: [...NODE_FLAGS, '--expose-gc'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('gateway child did not start in 30 s')), 30_000);
    child.once('message', (m: { port: number; maxIdleRooms: number; idleTtlMs: number }) => {
      clearTimeout(timer);
      resolve({ child, ...m });
    });
    child.once('exit', (code) => reject(new Error(`gateway child exited (${code})`)));
  });
}

function measure(child: ChildProcess): Promise<Figures> {
  return new Promise((resolve) => {
    child.once('message', (m: Figures) => resolve(m));
    child.send('measure');
  });
}

async function startBackend(): Promise<http.Server> {
  const server = http.createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/plain', 'content-length': '3' });
    res.end('ok\n');
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return server;
}

/** `count` page requests with distinct keys `${prefix}-<i>`, at most `rate` per second, on keep-alive connections. */
async function flood(port: number, prefix: string, count: number, rate: number, distinct = count): Promise<{ ms: number; failed: number; why: string }> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: CONNECTIONS });
  const started = Date.now();
  let next = 0;
  let failed = 0;
  const why = new Map<string, number>();
  const note = (what: string): void => {
    failed++;
    why.set(what, (why.get(what) ?? 0) + 1);
  };
  const one = (i: number): Promise<void> =>
    new Promise((resolve) => {
      const req = http.get({ host: '127.0.0.1', port, path: `/r/${prefix}-${i % distinct}-${((i % distinct) * 2654435761) % 1e9}/`, agent }, (res) => {
        if (res.statusCode !== 200) note(String(res.statusCode));
        res.resume();
        res.on('end', resolve);
        res.on('error', resolve);
      });
      req.on('error', (err: NodeJS.ErrnoException) => {
        note(err.code ?? err.message);
        resolve();
      });
    });
  const worker = async (): Promise<void> => {
    while (next < count) {
      const i = next++;
      // Paced: request i is not sent before its slot in the window.
      const due = started + (i / rate) * 1000;
      const wait = due - Date.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      await one(i);
    }
  };
  await Promise.all(Array.from({ length: CONNECTIONS }, worker));
  agent.destroy();
  return { ms: Date.now() - started, failed, why: [...why].map(([k, n]) => `${k} x${n}`).join(', ') };
}

async function redisMemory(url: string): Promise<{ used: number; keys: number }> {
  const r = new Redis(url, { lazyConnect: true });
  await r.connect();
  const info = await r.info('memory');
  const keys = await r.dbsize();
  await r.quit();
  return { used: Number(/used_memory:(\d+)/.exec(info)?.[1] ?? NaN), keys };
}

async function evictions(g: Gateway): Promise<string> {
  const text = await g.metrics.registry.metrics();
  return text
    .split('\n')
    .filter((l) => l.startsWith('roomgate_idle_rooms_evicted_total'))
    .join(', ');
}

async function main(): Promise<void> {
  let redis: LocalRedis | null = null;
  let child: ChildProcess | null = null;
  const backend = await startBackend();
  try {
    if (values.redis) redis = await startRedisServer(0);
    const started = await startChild({
      backends: [{ id: 'b1', url: `http://127.0.0.1:${(backend.address() as { port: number }).port}` }],
      listen: { host: '127.0.0.1', port: 0 },
      admin: { enabled: false },
      cookie: { secrets: ['0123456789abcdef0123456789abcdef'] },
      shutdown: { graceMs: 0 },
      log: { level: 'silent' },
      ...(values['max-idle-rooms'] ? { placement: { maxIdleRooms: Number(values['max-idle-rooms']) } } : {}),
      ...(redis ? { redis: { url: redis.url } } : {}),
      ...(values.config ? (JSON.parse(values.config) as Record<string, unknown>) : {}),
    });
    child = started.child;
    say(`room flood: ${ROOMS} requests, ${values.distinct ?? ROOMS} distinct keys in ${SECONDS} s, ${CONNECTIONS} connections, store ${redis ? 'redis' : 'memory'}, placement.maxIdleRooms ${started.maxIdleRooms}, idleTtlMs ${started.idleTtlMs}`);

    await flood(started.port, 'warm', ROOMS, 1e9, WARM_ROOMS);
    const before = await measure(child);
    const redisBefore = redis ? await redisMemory(redis.url) : null;
    const run = await flood(started.port, 'flood', ROOMS, ROOMS / SECONDS, values.distinct ? Number(values.distinct) : ROOMS);
    const after = await measure(child);
    say(`sent ${ROOMS} in ${(run.ms / 1000).toFixed(1)} s (${run.failed} not 200${run.failed > 0 ? `: ${run.why}` : ''})`);
    say(`gateway RSS after full GC: ${(before.rss / MB).toFixed(1)} -> ${(after.rss / MB).toFixed(1)} MB (+${((after.rss - before.rss) / MB).toFixed(1)} MB)`);
    say(`gateway heap used after full GC: ${(before.heap / MB).toFixed(1)} -> ${(after.heap / MB).toFixed(1)} MB (+${((after.heap - before.heap) / MB).toFixed(1)} MB)`);
    say(`gateway heap total ${(before.heapTotal / MB).toFixed(1)} -> ${(after.heapTotal / MB).toFixed(1)} MB, external + array buffers ${(before.external / MB).toFixed(1)} -> ${(after.external / MB).toFixed(1)} MB`);
    say(`gateway RSS anonymous ${(before.rssAnon / MB).toFixed(1)} -> ${(after.rssAnon / MB).toFixed(1)} MB, file-backed (code) ${(before.rssFile / MB).toFixed(1)} -> ${(after.rssFile / MB).toFixed(1)} MB`);
    say(`evictions: ${after.evictions}`);
    if (redis && redisBefore) {
      const r = await redisMemory(redis.url);
      const kept = r.keys - redisBefore.keys;
      const grew = r.used - redisBefore.used;
      say(`redis used_memory: ${(redisBefore.used / MB).toFixed(1)} -> ${(r.used / MB).toFixed(1)} MB (+${(grew / MB).toFixed(1)} MB), keys ${redisBefore.keys} -> ${r.keys}`);
      if (kept > 0) say(`redis bytes per kept placement: ${Math.round(grew / kept)}`);
    }
  } finally {
    if (child && child.exitCode === null) {
      const exited = new Promise((r) => child!.once('exit', r));
      child.send('stop');
      await Promise.race([exited, new Promise((r) => setTimeout(r, 5_000))]);
      if (child.exitCode === null) child.kill('SIGKILL');
    }
    if (redis) await stopChild(redis.child);
    backend.close();
  }
}

(values.serve !== undefined ? serve(values.serve) : main()).then(
  () => {
    if (values.serve === undefined) process.exit(0);
  },
  (err: unknown) => {
    say(`room flood failed: ${(err as Error).stack ?? String(err)}`);
    process.exit(1);
  },
);
