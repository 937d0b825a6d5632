// The backend pods' lifecycle hooks of deploy/kubernetes/backends.yaml, run for real: the
// preStop and postStart scripts exactly as the manifest has them (only the app's port and the
// admin URL differ, as the pod's 8000 and Service name do not exist here), with the drain token of
// the manifests' Secret, against a real gateway (built CLI and gateway, dist/) in front of two real
// demo backends serving the handoff hooks. The preStop drains its own backend with handoff: every
// live room is handed off (not reset) and the script returns once the backend holds none; the
// postStart undrains it. The manifests as data: test/deploy/kubernetes.test.ts.
import { execFile } from 'node:child_process';
import { dirname } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readText, yamlDocs, type Obj } from '../support/deploy-files.js';
import { freePortRange } from '../support/ports.js';
import { backendRooms, Client, ROOT, startBackend, startGateway, stopAll, type BackendProc, type GatewayProc } from '../support/processes.js';

const app = (yamlDocs('deploy/kubernetes/backends.yaml').find((d) => d.kind === 'StatefulSet') as Obj).spec.template.spec.containers[0] as Obj;
const script = (hook: 'preStop' | 'postStart'): string => (app.lifecycle[hook].exec.command as string[])[2] as string;
const secret = yamlDocs('deploy/kubernetes/secret.yaml').find((d) => d.kind === 'Secret') as Obj;
const DRAIN_TOKENS = String(secret.stringData['drain-tokens']);

let backends: BackendProc[];
let gw: GatewayProc;

beforeAll(async () => {
  // The ids roomgate gives StatefulSet pods found by SRV: pod name and port. Each backend is
  // started under that id (its key is derived from it, and every call roomgate signs names it), so
  // the ports are chosen first.
  const base = await freePortRange(2);
  backends = await Promise.all([0, 1].map((i) => startBackend(`demo-backend-${i}:${base + i}`, ['--port', String(base + i)])));
  gw = await startGateway({
    env: { ROOMGATE_DRAIN_TOKENS: DRAIN_TOKENS },
    config: { backends: backends.map((b) => ({ id: b.id, url: b.url })), placement: { heartbeatMs: 200 }, presence: { ttlMs: 1_000 } },
  });
}, 30_000);

afterAll(stopAll);

/** Runs a hook's script as the pod would (sh -c), in the image's working directory, with Node 24 first on PATH. */
function runHook(hook: 'preStop' | 'postStart', b: BackendProc, index: number): Promise<{ code: number; stdout: string; stderr: string }> {
  const text = script(hook).replaceAll('8000', String(b.port));
  const env = {
    PATH: `${dirname(process.execPath)}:${process.env.PATH ?? ''}`,
    POD_NAME: `demo-backend-${index}`,
    ROOMGATE_ADMIN_URL: `http://127.0.0.1:${gw.adminPort}`,
    ROOMGATE_DRAIN_TOKENS: DRAIN_TOKENS,
  };
  return new Promise((resolve) => {
    execFile('sh', ['-c', text], { cwd: ROOT, env, timeout: 60_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? Number((err as { code?: unknown }).code ?? 1) : 0, stdout, stderr });
    });
  });
}

async function adminGet(path: string): Promise<any> {
  const r = await fetch(`http://127.0.0.1:${gw.adminPort}${path}`, { signal: AbortSignal.timeout(5_000) });
  return r.json();
}

describe('deploy/kubernetes/backends.yaml hooks', () => {
  it('preStop drains its own backend with handoff and returns when it holds no room; postStart undrains it', async () => {
    const clients: Client[] = [];
    const on = new Map<string, string[]>();
    for (let i = 0; i < 8; i++) {
      const room = `k8s-${i}`;
      const c = new Client(`${gw.wsUrl}/ws/live/?room=${room}`);
      clients.push(c);
      const owner = await c.join(room);
      on.set(owner, [...(on.get(owner) ?? []), room]);
    }
    // The backend with the most rooms is the pod being stopped.
    const index = (on.get(backends[1]!.id)?.length ?? 0) > (on.get(backends[0]!.id)?.length ?? 0) ? 1 : 0;
    const target = backends[index] as BackendProc;
    const rooms = (on.get(target.id) ?? []).sort();
    expect(rooms.length).toBeGreaterThan(0);

    const stop = await runHook('preStop', target, index);
    expect(stop.code, stop.stderr).toBe(0);
    expect((await backendRooms([target])).get(target.id)).toEqual({});
    expect((await adminGet(`/backends/${encodeURIComponent(target.id)}`)).state).toBe('draining');
    // Handed off with their state, not reset: one handoff moved each room.
    const handoffs = (await adminGet('/events')).handoffs.recent as { room: string; from: string; result: string }[];
    const moved = handoffs.filter((h) => h.from === target.id && h.result === 'moved').map((h) => h.room);
    expect([...new Set(moved)].sort()).toEqual(rooms);

    const start = await runHook('postStart', target, index);
    expect(start.code, start.stderr).toBe(0);
    expect((await adminGet(`/backends/${encodeURIComponent(target.id)}`)).state).toBe('up');
    for (const c of clients) c.ws.terminate();
  }, 90_000);
});

describe('docs/deployment.md', () => {
  it('shows the hooks as backends.yaml has them, line for line', () => {
    const doc = readText('docs/deployment.md');
    for (const hook of ['preStop', 'postStart'] as const) {
      for (const line of script(hook).split('\n').filter((l) => l.trim() !== '')) expect(doc, `${hook}: ${line}`).toContain(line.trim());
    }
  });
});
