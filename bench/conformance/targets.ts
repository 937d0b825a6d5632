/**
 * The proxies the conformance corpora and the fuzzer run against outside vitest: roomgate, nginx
 * and HAProxy as the benchmark suite starts them (bench/suite/proxies.ts, generated configs in
 * temp directories), and the http-proxy-3 reference (reference-proxy.ts). Each sits in front of
 * one byte-logging backend (test/conformance/backend.ts).
 */
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort, startProc, stopProc, waitHttpOk, which } from '../suite/procs.js';
import { startTarget } from '../suite/proxies.js';

export const PROXIES = ['roomgate', 'nginx', 'haproxy', 'http-proxy-3'] as const;
export type ProxyName = (typeof PROXIES)[number];

export interface ConformanceTarget {
  readonly name: ProxyName;
  readonly port: number;
  /** null while the proxy runs and answers /healthz; else why not. */
  alive(): Promise<string | null>;
  logTail(n: number): string[];
  stop(): Promise<void>;
}

const REFERENCE = join(fileURLToPath(new URL('.', import.meta.url)), 'reference-proxy.js');

/** Whether the proxy can be started here (nginx and HAProxy come from the system). */
export function installed(name: ProxyName): boolean {
  return name === 'nginx' || name === 'haproxy' ? which(name) !== null : true;
}

async function healthz(port: number, pid: number | null): Promise<string | null> {
  if (pid !== null) {
    try {
      process.kill(pid, 0);
    } catch {
      return 'the proxy process exited';
    }
  }
  try {
    const res = await fetch(`http://127.0.0.1:${port}/healthz`, { signal: AbortSignal.timeout(5_000) });
    await res.arrayBuffer();
    return res.status === 200 ? null : `/healthz answered ${res.status}`;
  } catch (err) {
    return `/healthz failed: ${(err as Error).message}`;
  }
}

export async function startConformanceTarget(name: ProxyName, backendPort: number, roomgateConfig: Record<string, unknown>): Promise<ConformanceTarget> {
  if (name === 'http-proxy-3') {
    const port = await freePort();
    const proc = startProc(name, process.execPath, [REFERENCE, String(port), `http://127.0.0.1:${backendPort}`]);
    await waitHttpOk(proc, `http://127.0.0.1:${port}/healthz`, 15_000);
    return { name, port, alive: () => healthz(port, proc.pid), logTail: (n) => proc.output.slice(-n), stop: () => stopProc(proc) };
  }
  const running = await startTarget(name, {
    backends: [{ id: 'b1', port: backendPort }],
    cpu: `0-${availableParallelism() - 1}`,
    secret: 'conformance-secret-0123456789abcdef',
    nofile: 4_096,
    roomgateConfig,
  });
  const port = running.port as number;
  return { name, port, alive: () => healthz(port, running.pid), logTail: (n) => running.logTail(n), stop: () => running.stop() };
}
