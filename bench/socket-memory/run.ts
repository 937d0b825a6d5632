/**
 * What memory per busy socket is made of: one roomgate process (the suite's start, the node flags
 * it ships with) in front of the suite's 3 backends, the suite's game clients (an input every
 * 400 ms, 5 broadcasts/s per socket), measured at 0, N1 and N2 open tunnels without depending on
 * CPU speed: VmRSS and smaps_rollup from /proc, process.memoryUsage() and the V8 heap spaces read
 * in the gateway through its inspector (SIGUSR1, bench/soak/inspector.ts), each before and after
 * a full collection; then heap snapshots at N2 and, after the N2 - N1 extra sockets closed, at N1:
 * their difference per tunnel, kind by kind (heap-census.ts).
 *
 *   npm run bench:socket-memory -- [--clients 1000,3000] [--settle 8] [--no-snapshot] [--no-gc-before] [--concurrency 200]
 *
 * Prints (stdout, markdown) the samples, the suite's figure ((RSS - RSS before the first socket) /
 * sockets, no collection), the marginal cost of a socket between N1 and N2 split into V8 heap,
 * external memory and the rest (native: libuv handles, Node's stream wraps, malloc), the fixed
 * part that the suite's figure spreads over the sockets, and the heap per tunnel by kind.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { parseArgs } from 'node:util';
import { createRoomSigner } from '../../src/room/signing.js';
import { LoadGen } from '../suite/driver.js';
import type { ClientSpec } from '../suite/loadgen.js';
import { cleanupAll, freePort, sleep, startProc, waitLine } from '../suite/procs.js';
import { cookieHeader, WS_PATH } from '../suite/protocol.js';
import { roomgateNodeArgs, startTarget, versions } from '../suite/proxies.js';
import { loadAvg1 } from '../suite/cpu.js';
import { openCollector, type Collector } from '../soak/inspector.js';
import { census, perTunnel } from './heap-census.js';

const say = (line: string): boolean => process.stderr.write(`${line}\n`);
const out = (line = ''): boolean => process.stdout.write(`${line}\n`);
const BACKEND = join(import.meta.dirname, '../suite/backend.js');
const ROOM_SIZE = 4;

interface Sample {
  readonly label: string;
  readonly sockets: number;
  readonly gc: boolean;
  /** KB, from /proc/PID/status and smaps_rollup. */
  readonly rssKb: number;
  readonly anonKb: number;
  /** Bytes, process.memoryUsage(). */
  readonly heapUsed: number;
  readonly external: number;
  readonly arrayBuffers: number;
  /** Bytes resident per V8 space (physical_space_size). */
  readonly spaces: Record<string, number>;
}

function procKb(file: string, field: string): number {
  const m = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(readFileSync(file, 'utf8'));
  return m ? Number(m[1]) : Number.NaN;
}

const PROBE = `(() => {
  const m = process.memoryUsage();
  const spaces = {};
  for (const s of process.getBuiltinModule('v8').getHeapSpaceStatistics()) spaces[s.space_name] = s.physical_space_size;
  return { heapUsed: m.heapUsed, external: m.external, arrayBuffers: m.arrayBuffers, spaces };
})()`;

async function take(c: Collector, pid: number, label: string, sockets: number, gc: boolean): Promise<Sample> {
  if (gc) await c.collect();
  const v = await c.evaluate<Pick<Sample, 'heapUsed' | 'external' | 'arrayBuffers' | 'spaces'>>(PROBE);
  return { label, sockets, gc, rssKb: procKb(`/proc/${pid}/status`, 'VmRSS'), anonKb: procKb(`/proc/${pid}/smaps_rollup`, 'Anonymous'), ...v };
}

function specs(port: number, secret: string, from: number, n: number, prefix: string): ClientSpec[] {
  const signer = createRoomSigner({ secrets: [secret], format: 'roomgate', cookieName: 'roomgate_room', salt: '', maxAgeS: 86_400 });
  const signed = new Map<number, string>();
  const now = Date.now();
  return Array.from({ length: n }, (_, k) => {
    const i = from + k;
    const r = Math.floor(i / ROOM_SIZE);
    const room = `${prefix}-${r}`;
    let s = signed.get(r);
    if (s === undefined) signed.set(r, (s = signer.sign(room, now)));
    return { port, path: WS_PATH, origin: `http://127.0.0.1:${port}`, cookie: cookieHeader(room, s, i) };
  });
}

const kb = (bytes: number): string => (bytes / 1024).toFixed(2);
const mb = (bytes: number): string => (bytes / 2 ** 20).toFixed(1);
const heapKb = (s: Sample): number => Object.values(s.spaces).reduce((a, b) => a + b, 0) / 1024;

function samplesTable(samples: readonly Sample[]): void {
  out('| sample | sockets | VmRSS MB | anonymous MB | V8 heap resident MB | of it new space MB | heap used MB | external MB | of it ArrayBuffers MB | rest (RSS - heap - external) MB |');
  out('|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|');
  for (const s of samples) {
    const rest = s.rssKb * 1024 - heapKb(s) * 1024 - s.external;
    out(`| ${s.label}${s.gc ? ' (after full GC)' : ''} | ${s.sockets} | ${(s.rssKb / 1024).toFixed(1)} | ${(s.anonKb / 1024).toFixed(1)} | ${(heapKb(s) / 1024).toFixed(1)} | ${mb(s.spaces.new_space ?? 0)} | ${mb(s.heapUsed)} | ${mb(s.external)} | ${mb(s.arrayBuffers)} | ${mb(rest)} |`);
  }
}

/** Per socket between two samples: RSS, and RSS split into heap used, external and the rest. */
function marginal(a: Sample, b: Sample): string {
  const n = b.sockets - a.sockets;
  const rss = ((b.rssKb - a.rssKb) * 1024) / n;
  const heap = (b.heapUsed - a.heapUsed) / n;
  const heapRes = ((heapKb(b) - heapKb(a)) * 1024) / n;
  const ext = (b.external - a.external) / n;
  return `RSS ${kb(rss)} KB = V8 heap resident ${kb(heapRes)} KB (used ${kb(heap)}) + external ${kb(ext)} KB + native rest ${kb(rss - heapRes - ext)} KB`;
}

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { clients: { type: 'string', default: '1000,3000' }, settle: { type: 'string', default: '8' }, 'no-snapshot': { type: 'boolean' }, 'no-gc-before': { type: 'boolean' }, concurrency: { type: 'string', default: '200' } } });
  const [n1, n2] = values.clients.split(',').map(Number) as [number, number];
  if (!(n1 > 0 && n2 > n1)) throw new Error(`--clients: two counts, the second larger (e.g. 1000,3000), got ${values.clients}`);
  const settleMs = Number(values.settle) * 1000;
  // Handshakes in flight while the sockets open (the suite's: 200).
  const concurrency = Number(values.concurrency);
  const load = [loadAvg1()];
  say(`socket-memory: ${n1} and ${n2} busy sockets; load average ${load[0]}`);
  const backends = await Promise.all(
    ['b1', 'b2', 'b3'].map(async (id) => {
      const p = startProc(`backend ${id}`, process.execPath, [BACKEND, '--id', id, '--port', '0'], { cpu: '1', stdin: true });
      const line = await waitLine(p, 'listening line', (l) => l.includes('"listening"'), 15_000);
      return { id, port: (JSON.parse(line) as { port: number }).port };
    }),
  );
  const secret = randomBytes(24).toString('base64url');
  const inspectPort = await freePort();
  const flags = roomgateNodeArgs();
  process.env.BENCH_ROOMGATE_NODE_ARGS = [...flags, `--inspect-port=127.0.0.1:${inspectPort}`].join(' ');
  const gw = await startTarget('roomgate', { backends, cpu: '0', secret, nofile: 20_000 });
  const pid = gw.pid!;
  // The suite's own baseline: read as soon as the gateway answers, before its inspector opens.
  const rssStartKb = procKb(`/proc/${pid}/status`, 'VmRSS');
  const c = await openCollector(pid, inspectPort, 60_000);
  const first = await LoadGen.start(1, '1');
  const second = await LoadGen.start(1, '1');
  const samples: Sample[] = [];
  const level = async (label: string, sockets: number, gc = true): Promise<void> => {
    samples.push(await take(c, pid, label, sockets, false));
    samples.push(await take(c, pid, label, sockets, gc));
    say(`  ${label}: ${sockets} sockets, VmRSS ${(samples[samples.length - 2]!.rssKb / 1024).toFixed(1)} MB, after GC ${(samples[samples.length - 1]!.rssKb / 1024).toFixed(1)} MB; load ${loadAvg1()}`);
  };
  await sleep(1_000);
  // --no-gc-before: the startup's garbage stays until V8 collects it itself, as in the suite.
  await level('before', 0, !values['no-gc-before']);
  const o1 = await first.open(specs(gw.port!, secret, 0, n1, 'm'), { concurrency, mode: 'game' });
  await sleep(settleMs);
  await level('N1', o1.opened);
  const o2 = await second.open(specs(gw.port!, secret, n1, n2 - n1, 'm'), { concurrency, mode: 'game' });
  await sleep(settleMs);
  await level('N2', o1.opened + o2.opened);
  load.push(loadAvg1());
  if (o1.failed + o2.failed > 0) say(`  ${o1.failed + o2.failed} sockets failed to open: ${[...o1.errors, ...o2.errors].join('; ')}`);

  let heap: ReturnType<typeof perTunnel> | null = null;
  if (!values['no-snapshot']) {
    say('  heap snapshot at N2...');
    const big = census(await c.snapshot());
    await second.closeAll();
    // Every tunnel of the closed clients ends within the half-close linger (5 s).
    await sleep(7_000);
    say('  heap snapshot at N1...');
    const small = census(await c.snapshot());
    heap = perTunnel(small, big, o2.opened);
  }
  await first.closeAll();
  await second.closeAll();
  c.close();

  const [s0live, s0, s1live, s1, s2live, s2] = [samples[0]!, samples[1]!, samples[2]!, samples[3]!, samples[4]!, samples[5]!];
  out(`# Memory per busy socket (${new Date().toISOString()})`);
  out();
  out(`roomgate ${versions().roomgate}, Node ${process.versions.node}, flags \`${flags.join(' ')}\`; load average ${load.join(' → ')}; game clients (input every 400 ms, 5 broadcasts/s per socket), ${settleMs / 1000} s of traffic before each sample.`);
  out();
  samplesTable(samples);
  out();
  const suite = (base: number): string => `${n1}: ${((s1live.rssKb - base) / s1live.sockets).toFixed(2)} KB, ${s2live.sockets}: ${((s2live.rssKb - base) / s2live.sockets).toFixed(2)} KB`;
  out(`- The suite's figure ((VmRSS - VmRSS before the first socket) / sockets, no collection), from VmRSS as soon as the gateway answered (${(rssStartKb / 1024).toFixed(1)} MB, as the suite reads it): ${suite(rssStartKb)}; from the \`before\` sample (inspector open, startup garbage not collected): ${suite(s0live.rssKb)}.`);
  out(`- Marginal, N1 → N2 after full GC: ${marginal(s1, s2)}.`);
  out(`- 0 → N1 after full GC: ${marginal(s0, s1)}.`);
  const fixedKb = s1live.rssKb - s0.rssKb - ((s2.rssKb - s1.rssKb) / (s2.sockets - s1.sockets)) * s1.sockets;
  out(`- Fixed part in the suite's figure at N1 (RSS growth 0 → N1 minus N1 x the marginal cost): ${(fixedKb / 1024).toFixed(1)} MB = ${(fixedKb / s1.sockets).toFixed(2)} KB per socket at N1; new space resident ${mb(s0.spaces.new_space ?? 0)} → ${mb(s1live.spaces.new_space ?? 0)} MB, code ${mb(s0.spaces.code_space ?? 0)} → ${mb(s1live.spaces.code_space ?? 0)} MB.`);
  if (heap) {
    out();
    out(`Heap per tunnel (snapshot at ${s2.sockets} minus at ${o1.opened} sockets, / ${o2.opened}; shallow sizes, which add up): ${heap.totalBytes.toFixed(0)} bytes`);
    out();
    out('| kind | per tunnel | bytes per tunnel |');
    out('|---|---:|---:|');
    for (const r of heap.rows.slice(0, 40)) out(`| ${r.key.replace(/\|/g, '\\|')} | ${r.count.toFixed(2)} | ${r.bytes.toFixed(0)} |`);
  }
}

try {
  await main();
} catch (err) {
  say(`socket-memory failed: ${(err as Error).stack ?? (err as Error).message}`);
  process.exitCode = 2;
} finally {
  await cleanupAll();
}
