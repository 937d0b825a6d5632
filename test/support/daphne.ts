// The Django Channels example (examples/django-channels) under daphne, Debian's, on a free port:
// started for a test, killed (and waited for) in its afterAll; its collectstatic, and the example's
// roomgate.yaml as a test's gateway takes it.
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { closeBrowsers } from './browser.js';
import { ROOT, stopAll, waitFor } from './processes.js';

export const DAPHNE = '/usr/bin/daphne';
export const PYTHON = '/usr/bin/python3';
export const DJANGO_APP = join(ROOT, 'examples/django-channels');
/** The example imports roomgate_kit, which an app installs (pip install ./python); the tests take the checkout's. */
export const KIT_PATH = { PYTHONPATH: join(ROOT, 'python') };

export interface DaphneApp {
  readonly url: string;
  readonly port: number;
}

const daphnes: ChildProcess[] = [];

/** daphne on a free port (it logs the one it got), with `env` added to this process's; by default the Django Channels example. */
export async function startDaphne(env: Record<string, string>, app: { cwd: string; asgi: string } = { cwd: DJANGO_APP, asgi: 'liveapp.asgi:application' }): Promise<DaphneApp> {
  const child = spawn(DAPHNE, ['-b', '127.0.0.1', '-p', '0', app.asgi], { cwd: app.cwd, stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, PYTHONDONTWRITEBYTECODE: '1', ...KIT_PATH, ...env } });
  daphnes.push(child);
  let log = '';
  child.stderr?.on('data', (c: Buffer) => (log += c.toString('utf8')));
  const port = await waitFor(`daphne listening (${log})`, 20_000, () => {
    if (child.exitCode !== null) throw new Error(`daphne exited: ${log}`);
    const m = /Listening on TCP address 127\.0\.0\.1:(\d+)/.exec(log);
    return m ? Number(m[1]) : undefined;
  });
  return { port, url: `http://127.0.0.1:${port}` };
}

/** Kills every daphne started here and waits until each has exited. */
export async function stopDaphnes(): Promise<void> {
  await Promise.all(
    daphnes.splice(0).map(async (d) => {
      if (d.exitCode !== null || d.signalCode !== null) return;
      const exited = new Promise((r) => d.once('exit', r));
      d.kill('SIGKILL');
      await exited;
    }),
  );
}

/** The afterAll of a test of the example: its browsers, gateways and sockets, daphnes, then its static directory. */
export async function stopExample(staticRoot: string): Promise<void> {
  await closeBrowsers();
  await stopAll();
  await stopDaphnes();
  rmSync(staticRoot, { recursive: true, force: true });
}

/** The example's manage.py under Debian's python3 (killed after 20 s): its exit code and output. */
export function manage(args: string[], env: Record<string, string>): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(PYTHON, ['manage.py', ...args], { cwd: DJANGO_APP, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...KIT_PATH, ...env } });
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString('utf8')));
    child.stderr.on('data', (c: Buffer) => (out += c.toString('utf8')));
    const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
    child.on('error', reject);
    child.on('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, out });
    });
  });
}

/**
 * The example's roomgate.yaml (docs/django.md quotes it) as a test's gateway takes it: without its
 * backends (the test gives its own), with the test's static directory and quicker clocks.
 */
export function exampleGatewayConfig(staticRoot: string): Record<string, unknown> {
  const file = parseYaml(readFileSync(join(DJANGO_APP, 'roomgate.yaml'), 'utf8')) as Record<string, Record<string, unknown>>;
  const { backends: _listed, ...fromFile } = file;
  return {
    ...fromFile,
    health: { ...fromFile.health, intervalMs: 500, timeoutMs: 500 },
    static: { mounts: [{ prefix: '/static/', dir: staticRoot }] },
    placement: { heartbeatMs: 200 },
    presence: { ttlMs: 1_000 },
  };
}
