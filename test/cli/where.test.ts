// `roomgate where` asks the running gateway where a room IS and why; with no gateway answering (or
// --offline) it says plainly that its answer is the ring owner a NEW room would get. The room
// here was placed while its ring owner was in maintenance, so the two answers differ, as they do
// in a live system after bounded loads, moves and failovers. What it prints is read in this
// process (runCliHere: the CLI's run(), as the binary calls it); the binary in a pipe and on a terminal.
import { createServer } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildRing } from '../../src/placement/ring.js';
import { Client, httpRequest, runCli, startBackends, startGateway, stopAll, writeConfig, type BackendProc, type GatewayProc } from '../support/processes.js';
import { runCliHere } from './in-process.js';
import { runCliTty } from './support.js';

const TOKEN = 'where-admin-token-0123456789';

let backends: BackendProc[];
let gw: GatewayProc;
let admin: string;
let env: Record<string, string>;
/** A room whose ring owner is b1, placed elsewhere (b1 was in maintenance then). */
let moved = '';
let placedOn = '';
/** A room nobody asked for yet: not placed. */
let fresh = '';

beforeAll(async () => {
  backends = await startBackends(['b1', 'b2', 'b3']);
  gw = await startGateway({ backends, env: { ROOMGATE_ADMIN_TOKEN: TOKEN } });
  admin = `http://127.0.0.1:${gw.adminPort}`;
  env = { ROOMGATE_ADMIN_URL: admin, ROOMGATE_ADMIN_TOKEN: TOKEN };
  const ring = buildRing(backends.map((b) => ({ id: b.id, weight: 1 })));
  const ofB1 = Array.from({ length: 200 }, (_, i) => `w-${i}`).filter((r) => ring.first(r) === 'b1');
  [moved, fresh] = ofB1 as [string, string];
  expect((await runCliHere(['maintenance', 'b1'], env)).code).toBe(0);
  const page = await httpRequest(gw.port, `/game/${moved}/`);
  placedOn = String(page.headers['x-backend-id']);
  expect(['b2', 'b3']).toContain(placedOn);
  expect((await runCliHere(['undrain', 'b1'], env)).code).toBe(0);
});

afterAll(stopAll);

interface Row {
  room: string;
  backend: string | null;
  url: string | null;
  reason: string;
  placement: { backend: string; epoch: number } | null;
  wouldPlace: boolean;
  socketsHere: number | null;
  source: 'gateway' | 'ring';
}

const urlOf = (id: string): string => backends.find((b) => b.id === id)!.url;

describe('where asks the running gateway', () => {
  it('says where the room IS (not its ring owner), why, its placement epoch and the sockets here', async () => {
    const r = await runCliHere(['where', moved, fresh, '--json'], env);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const [m, f] = JSON.parse(r.stdout) as Row[];
    expect(m).toEqual({
      room: moved,
      backend: placedOn,
      url: urlOf(placedOn),
      reason: 'sticky',
      placement: { backend: placedOn, epoch: expect.any(Number) },
      wouldPlace: false,
      socketsHere: 0,
      source: 'gateway',
    });
    // Not placed yet: where its first request would place it.
    expect(f).toMatchObject({ room: fresh, backend: 'b1', placement: null, wouldPlace: true, socketsHere: 0, source: 'gateway' });
    expect(['ring', 'bounded-skip']).toContain(f?.reason);

    const c = new Client(`${gw.wsUrl}/ws/live/?room=${moved}`);
    expect(await c.join(moved)).toBe(placedOn);
    const plain = await runCli(['where', moved], env);
    expect(plain).toEqual({ code: 0, stdout: `${moved}\t${placedOn}\t${urlOf(placedOn)}\tsticky\t${m?.placement?.epoch}\t1\n`, stderr: '' });
    await c.close();
  });

  it('on a terminal: a table saying why in words', async () => {
    const t = await runCliTty(['where', moved, fresh], env);
    expect(t.code).toBe(0);
    const lines = t.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^ROOM +BACKEND +EPOCH +SOCKETS HERE +WHY$/);
    expect(lines[1]).toMatch(new RegExp(`^${moved} +${placedOn} +\\d+ +\\d+ +placed here; stays while the backend is up$`));
    expect(lines[2]).toMatch(new RegExp(`^${fresh} +b1 +- +0 +not placed yet: its first request places it here \\(the ring owner\\)$`));
    expect(lines).toHaveLength(3);
  });

  it('rejects an invalid key with the admin API\'s own words (exit 2)', async () => {
    const api = JSON.parse((await httpRequest(gw.adminPort, '/rooms/a%20b')).body) as { error: string | { message: string } };
    const words = typeof api.error === 'string' ? api.error : api.error.message;
    expect(words).toMatch(/^invalid room key/);
    const r = await runCliHere(['where', moved, 'a b', ''], env);
    expect(r.code).toBe(2);
    expect(r.stdout.split('\n').slice(1)).toEqual([`a b\terror: ${words}`, '\terror: invalid room key: it is empty', '']);
  });
});

describe('where without a gateway: the ring owner of a NEW room, said as such', () => {
  const config = (): string => writeConfig({ backends: backends.map((b) => ({ id: b.id, url: b.url })) });

  it('--offline', async () => {
    const r = await runCliHere(['where', moved, '--offline', '--json', '--config', config()], env);
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual([{ room: moved, backend: 'b1', url: urlOf('b1'), reason: 'ring', placement: null, wouldPlace: true, socketsHere: null, source: 'ring' }]);
    expect(r.stderr).toBe('note: --offline: the ring owner a NEW room would get (every backend up); a live room may be elsewhere\n');
  });

  it('no gateway answering at the admin URL', async () => {
    const deadAdmin = await closedPort();
    const r = await runCliHere(['where', moved, '--config', config(), '--admin', deadAdmin]);
    expect(r).toEqual({
      code: 0,
      stdout: `${moved}\tb1\t${urlOf('b1')}\tring\t-\t-\n`,
      stderr: `note: no gateway answered at ${deadAdmin} (ECONNREFUSED): this is the ring owner a NEW room would get; a live room may be elsewhere (--admin URL asks a gateway)\n`,
    });
    const t = await runCliHere(['where', moved, '--config', config()], { ROOMGATE_ADMIN_URL: deadAdmin }, { tty: true });
    expect(t.stdout).toMatch(new RegExp(`^ROOM +BACKEND +URL +WHY\\n${moved} +b1 +${urlOf('b1').replace(/\./g, '\\.')} +a NEW room goes here \\(the ring owner\\)\\n`, 'm'));
    expect(t.stdout).toContain('note: no gateway answered');
  });
});

/** A loopback URL on which nothing listens (a port just freed). */
async function closedPort(): Promise<string> {
  const srv = createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const port = (srv.address() as { port: number }).port;
  await new Promise((r) => srv.close(r));
  return `http://127.0.0.1:${port}`;
}
