// The Django Channels example (examples/django-channels) under daphne, Debian's, on a free port:
// started for a test, killed (and waited for) in its afterAll.
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { ROOT, waitFor } from './processes.js';

export const DAPHNE = '/usr/bin/daphne';
export const DJANGO_APP = join(ROOT, 'examples/django-channels');

export interface DaphneApp {
  readonly url: string;
  readonly port: number;
}

const daphnes: ChildProcess[] = [];

/** daphne on a free port (it logs the one it got), with `env` added to this process's; by default the Django Channels example. */
export async function startDaphne(env: Record<string, string>, app: { cwd: string; asgi: string } = { cwd: DJANGO_APP, asgi: 'liveapp.asgi:application' }): Promise<DaphneApp> {
  const child = spawn(DAPHNE, ['-b', '127.0.0.1', '-p', '0', app.asgi], { cwd: app.cwd, stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, PYTHONDONTWRITEBYTECODE: '1', ...env } });
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
