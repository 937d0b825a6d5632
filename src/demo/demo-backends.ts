// Starts the demo backends as child processes (one process per backend, as in production), for
// `roomgate start` with no backends configured.
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { backendKeys } from '../http/call-proof.js';
import type { Logger } from '../observability/logger.js';

export const DEMO_BACKEND_SCRIPT = fileURLToPath(new URL('../../examples/demo-backend/server.js', import.meta.url));

export interface DemoBackend {
  readonly id: string;
  readonly url: string;
  readonly process: ChildProcess;
}

/** The ids and URLs the demo uses, so `roomgate where` agrees with `roomgate start`. */
export function demoBackendSpecs(count: number, basePort: number): { id: string; url: string; port: number }[] {
  return Array.from({ length: count }, (_, i) => ({
    id: `demo-${i + 1}`,
    url: `http://127.0.0.1:${basePort + i}`,
    port: basePort + i,
  }));
}

/**
 * `callSecrets`: the gateway's call secrets; each backend is given only its own keys, derived from
 * them (ROOMGATE_BACKEND_KEYS in its environment, src/http/call-proof.ts); `handoffPath`: where they serve the handoff hooks (the gateway's handoff.path).
 */
export async function startDemoBackends(
  count: number,
  basePort: number,
  logger: Logger,
  callSecrets: readonly string[],
  handoffPath: string,
  timeoutMs = 10_000,
): Promise<DemoBackend[]> {
  const started: DemoBackend[] = [];
  try {
    for (const spec of demoBackendSpecs(count, basePort)) {
      const child = spawn(process.execPath, [DEMO_BACKEND_SCRIPT, '--port', String(spec.port), '--id', spec.id, '--host', '127.0.0.1', '--handoff-path', handoffPath, '--handoff-resume', 'on'], {
        stdio: ['ignore', 'pipe', 'inherit'],
        env: { ...process.env, ROOMGATE_CALL_SECRETS: '', ROOMGATE_BACKEND_KEYS: backendKeys(callSecrets, spec.id).join(',') },
      });
      started.push({ id: spec.id, url: spec.url, process: child });
      await waitListening(child, spec.id, timeoutMs);
      logger.info({ backend: spec.id, url: spec.url, backendPid: child.pid }, 'demo backend started');
    }
    return started;
  } catch (err) {
    await stopDemoBackends(started);
    throw err;
  }
}

function waitListening(child: ChildProcess, id: string, timeoutMs: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const lines = createInterface({ input: child.stdout! });
    const timer = setTimeout(() => fail(new Error(`demo backend ${id} did not start within ${timeoutMs} ms`)), timeoutMs);
    const fail = (err: Error): void => {
      clearTimeout(timer);
      lines.close();
      reject(err);
    };
    lines.on('line', (line) => {
      if (!line.includes('"listening"')) return;
      clearTimeout(timer);
      lines.close();
      child.stdout?.resume(); // keep draining so the child never blocks on a full pipe
      resolve();
    });
    child.once('exit', (code) => fail(new Error(`demo backend ${id} exited with code ${code} (is its port in use?)`)));
  });
}

export async function stopDemoBackends(backends: readonly DemoBackend[], timeoutMs = 5_000): Promise<void> {
  await Promise.all(
    backends.map(
      ({ process: child }) =>
        new Promise<void>((resolve) => {
          if (child.exitCode !== null || child.signalCode !== null) return resolve();
          const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
          child.once('exit', () => {
            clearTimeout(timer);
            resolve();
          });
          child.kill('SIGTERM');
        }),
    ),
  );
}
