/**
 * The relays the native-relay bench compares, each started fresh for one run and pinned to the
 * proxy's core: nginx as bench/suite starts it (1 worker, cookie hash, upgrade headers),
 * relay-server.js in its two modes (a JavaScript relay, the native relay), and roomgate itself as
 * the suite starts it, routing on the same plain `room` cookie (cookie.signed false), so that its
 * distance to the floor of a JavaScript relay is measured in the same rounds.
 */
import { join } from 'node:path';
import { freePort, startProc, stopProc, waitLine } from '../../suite/procs.js';
import { startTarget, type BackendAddr } from '../../suite/proxies.js';

/**
 * roomgate runs its native relay when built (proxy.relay: auto); roomgate-js is the same build with
 * proxy.relay: javascript; roomgate-before is another build (BENCH_ROOMGATE_MAIN_B=its
 * dist/src/main.js, its own native/ beside it), for a before/after in one run.
 */
export const RELAYS = ['nginx', 'js', 'native', 'roomgate', 'roomgate-js', 'roomgate-before'] as const;
export type Relay = (typeof RELAYS)[number];

export interface RunningRelay {
  readonly name: Relay;
  readonly port: number;
  /** Root of its process tree (the CPU and RSS counted). */
  readonly pid: number;
  logTail(n: number): string[];
  stop(): Promise<void>;
}

const RELAY_SERVER = join(import.meta.dirname, 'relay-server.js');

export interface RelayContext {
  readonly backends: readonly BackendAddr[];
  readonly cpu: string;
  readonly nofile: number;
  /** The native relay's silence time (it closes a tunnel silent that long); 0: none. */
  readonly silenceMs: number;
}

export async function startRelay(name: Relay, ctx: RelayContext): Promise<RunningRelay> {
  if (name === 'nginx' || name === 'roomgate' || name === 'roomgate-js' || name === 'roomgate-before') {
    // roomgate: the plain cookie the others hash; the secret only satisfies the start (no signed cookie is read).
    const roomgateConfig = { cookie: { name: 'room', signed: false }, ...(name === 'roomgate-js' ? { proxy: { relay: 'javascript' } } : {}) };
    const target = name === 'nginx' ? 'nginx' : 'roomgate';
    const before = name === 'roomgate-before' ? process.env.BENCH_ROOMGATE_MAIN_B : undefined;
    if (name === 'roomgate-before' && !before) throw new Error('roomgate-before: set BENCH_ROOMGATE_MAIN_B to the other build\'s dist/src/main.js');
    const run = await startTarget(target, { backends: ctx.backends, cpu: ctx.cpu, secret: target === 'roomgate' ? 'bench-native-relay-secret-0123456789' : '', nofile: ctx.nofile, roomgateConfig, ...(before ? { roomgateMain: before } : {}) });
    return { name, port: run.port!, pid: run.pid!, logTail: (n) => run.logTail(n), stop: () => run.stop() };
  }
  const port = await freePort();
  const args = [RELAY_SERVER, '--mode', name, '--port', String(port), '--backends', ctx.backends.map((b) => b.port).join(','), '--silence-ms', String(ctx.silenceMs)];
  const p = startProc(`${name} relay`, process.execPath, args, { cpu: ctx.cpu, stdin: true });
  try {
    await waitLine(p, 'listening line', (l) => l.includes('"listening"'), 15_000);
  } catch (err) {
    await stopProc(p);
    throw err;
  }
  return { name, port, pid: p.pid, logTail: (n) => p.output.slice(-n), stop: () => stopProc(p, 2_000) };
}
