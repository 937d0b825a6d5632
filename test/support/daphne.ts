// The Django Channels example (examples/django-channels) under daphne, Debian's, on a free port
// (uvicorn: uvicorn.ts, through startAsgiServer here): started for a test, killed (and waited for)
// in its afterAll; its collectstatic, and the example's roomgate.yaml as a test's gateway takes it.
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
  readonly child: ChildProcess;
}

/** The example's ASGI application, or another app's (its directory and module:attribute). */
export interface AsgiApp {
  readonly cwd: string;
  readonly asgi: string;
}
export const EXAMPLE_APP: AsgiApp = { cwd: DJANGO_APP, asgi: 'liveapp.asgi:application' };

const servers: ChildProcess[] = [];

/**
 * An ASGI server (daphne, uvicorn) run as `cmd args...` with `env` added to this process's, on the
 * port it logs (`listening` finds it in its stderr); tracked for stopDaphnes.
 */
export async function startAsgiServer(name: string, cmd: string, args: readonly string[], listening: RegExp, env: Record<string, string>, cwd: string): Promise<DaphneApp> {
  const child = spawn(cmd, args, { cwd, stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, PYTHONDONTWRITEBYTECODE: '1', ...KIT_PATH, ...env } });
  servers.push(child);
  let log = '';
  child.stderr?.on('data', (c: Buffer) => (log += c.toString('utf8')));
  const port = await waitFor(`${name} listening (${log})`, 20_000, () => {
    if (child.exitCode !== null) throw new Error(`${name} exited: ${log}`);
    const m = listening.exec(log);
    return m ? Number(m[1]) : undefined;
  });
  return { port, url: `http://127.0.0.1:${port}`, child };
}

/** daphne on a free port (it logs the one it got), with `env` added to this process's; by default the Django Channels example. */
export function startDaphne(env: Record<string, string>, app: AsgiApp = EXAMPLE_APP): Promise<DaphneApp> {
  return startAsgiServer('daphne', DAPHNE, ['-b', '127.0.0.1', '-p', '0', app.asgi], /Listening on TCP address 127\.0\.0\.1:(\d+)/, env, app.cwd);
}

/** Sends `signal` to one server and waits (at most `timeoutMs`, then SIGKILL) until it has exited: its exit code or signal. */
export async function stopAsgiServer(app: Pick<DaphneApp, 'child'>, signal: NodeJS.Signals, timeoutMs = 10_000): Promise<number | string> {
  const { child } = app;
  if (child.exitCode === null && child.signalCode === null) {
    const exited = new Promise((r) => child.once('exit', r));
    child.kill(signal);
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    await exited;
    clearTimeout(timer);
  }
  return child.exitCode ?? (child.signalCode as string);
}

/** Kills every daphne (and uvicorn) started here and waits until each has exited. */
export async function stopDaphnes(): Promise<void> {
  await Promise.all(servers.splice(0).map((d) => stopAsgiServer({ child: d }, 'SIGKILL')));
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

/** A push to a room through a gateway's push API, as a job sends it (sender job:test): its status and JSON answer. */
export async function pushThrough(gatewayUrl: string, token: string, room: string, body: unknown): Promise<{ status: number; json: Record<string, unknown> }> {
  const res = await fetch(`${gatewayUrl}/_roomgate/api/rooms/${room}/messages`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json', 'X-Roomgate-Sender': 'job:test' },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(5_000),
  });
  return { status: res.status, json: (await res.json()) as Record<string, unknown> };
}
