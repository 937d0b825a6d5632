// Demo backends (examples/demo-backend) in the test's own process, for tests that need backends to
// hold rooms and be the witness (/_backend/rooms) but never signal, kill or restart them: a backend
// process costs about 0.75 s of CPU, nearly all of it loading its modules. Each verifies calls with
// its own key, as startBackend's processes do (backendEnv); stopBackendsHere() closes them all.
import { startDemoBackend, type DemoBackend, type DemoBackendOptions } from '../../examples/demo-backend/server.js';
import { backendKeys } from '../../src/http/call-proof.js';
import { CALL_SECRET } from './processes.js';

/** What the tests read of a backend: startBackend's BackendProc without the process. */
export interface BackendHere {
  readonly id: string;
  readonly port: number;
  readonly url: string;
  readonly backend: DemoBackend;
}

const live = new Set<DemoBackend>();

/** A demo backend with the call key of backend `id`, on a free port of 127.0.0.1 unless `opts` say where. */
export async function startBackendHere(id: string, opts: Omit<DemoBackendOptions, 'id'> = {}): Promise<BackendHere> {
  const host = opts.host ?? '127.0.0.1';
  const backend = await startDemoBackend({ port: 0, id, callKeys: backendKeys([CALL_SECRET], id), ...opts, host });
  live.add(backend);
  return { id, port: backend.port, url: `http://${host}:${backend.port}`, backend };
}

export function startBackendsHere(ids: readonly string[]): Promise<BackendHere[]> {
  return Promise.all(ids.map((id) => startBackendHere(id)));
}

/** Closes every backend started here (with its sockets). Call from afterAll. */
export async function stopBackendsHere(): Promise<void> {
  const all = [...live];
  live.clear();
  await Promise.all(all.map((b) => b.close()));
}

/** `id=url` for each, as startGateway's `backends` takes them. */
export function backendArgs(backends: readonly BackendHere[]): string[] {
  return backends.map((b) => `${b.id}=${b.url}`);
}
