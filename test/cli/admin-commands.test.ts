// status, drain, undrain and maintenance against a real gateway, as a person (terminal) and a
// script (pipe, --json) see them; the admin API's errors in both shapes; a closed pipe. What a
// command prints is read in this process (runCliHere: the CLI's run(), as the binary calls it); the
// binary itself in a pipe, on a terminal and with its reader gone.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli, startBackends, startGateway, stopAll, type BackendProc, type GatewayProc } from '../support/processes.js';
import { runCliHere } from './in-process.js';
import { runCliPiped, runCliTty } from './support.js';

const TOKEN = 'cli-admin-token-0123456789';
const DRAIN = 'cli-drain-token-0123456789';
const BACKEND_KEYS = ['admin', 'deadline', 'health', 'id', 'removed', 'rooms', 'sockets', 'state', 'url', 'weight'];

let backends: BackendProc[];
let gw: GatewayProc;
let env: Record<string, string>;

beforeAll(async () => {
  backends = await startBackends(['b1', 'b2', 'b3']);
  gw = await startGateway({ backends, env: { ROOMGATE_ADMIN_TOKEN: TOKEN, ROOMGATE_DRAIN_TOKENS: `${DRAIN},cli-drain-token-old-012345` } });
  env = { ROOMGATE_ADMIN_URL: `http://127.0.0.1:${gw.adminPort}`, ROOMGATE_ADMIN_TOKEN: TOKEN };
});

afterAll(stopAll);

const ISO = /\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z/;

describe('drain, undrain, maintenance: one line', () => {
  it('in a pipe: BACKEND<TAB>STATE<TAB>DEADLINE', async () => {
    const t0 = Date.now();
    const d = await runCli(['drain', 'b2', '--deadline', '90s'], env);
    expect(d.stderr).toBe('');
    expect(d.code).toBe(0);
    const [id, state, deadline, ...more] = d.stdout.replace(/\n$/, '').split('\t');
    expect([id, state, more, d.stdout.split('\n').length]).toEqual(['b2', 'draining', [], 2]);
    expect(deadline).toMatch(ISO);
    expect(Date.parse(deadline as string) - t0).toBeGreaterThanOrEqual(89_000);
    expect(Date.parse(deadline as string) - Date.now()).toBeLessThanOrEqual(91_000);
    expect(await runCliHere(['undrain', 'b2'], env)).toEqual({ code: 0, stdout: 'b2\tup\t-\n', stderr: '' });
  });

  it('on a terminal: a sentence with the deadline in words', async () => {
    const d = await runCliTty(['drain', 'b3', '--deadline', '10m'], env);
    expect(d.code).toBe(0);
    expect(d.stdout).toMatch(/^b3 is now draining; deadline \d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ \(in (9m 5\d|10m 0)s\)\n$/);
    const m = await runCliHere(['maintenance', 'b3'], env, { tty: true });
    expect(m).toMatchObject({ code: 0, stdout: 'b3 is now in maintenance\n' });
    expect((await runCliHere(['undrain', 'b3'], env, { tty: true })).stdout).toBe('b3 is now up\n');
  });

  it('--json: the backend with stable fields', async () => {
    const d = await runCliHere(['drain', 'b1', '--deadline', '1h', '--json'], env);
    const b = JSON.parse(d.stdout) as Record<string, unknown>;
    expect(Object.keys(b).sort()).toEqual(BACKEND_KEYS);
    expect(b).toMatchObject({ id: 'b1', state: 'draining', deadline: expect.stringMatching(ISO), admin: { state: 'draining', deadline: b.deadline } });
    expect(JSON.parse((await runCliHere(['undrain', 'b1', '--json'], env)).stdout)).toMatchObject({ id: 'b1', state: 'up', deadline: null, admin: null });
  });
});

describe('status', () => {
  it('on a terminal: a table of backends and a line about this gateway', async () => {
    await runCliHere(['drain', 'b2', '--deadline', '5m'], env);
    try {
      const s = await runCliHere(['status'], env, { tty: true });
      expect(s.code).toBe(0);
      const lines = s.stdout.split('\n');
      expect(lines[0]).toMatch(/^BACKEND +STATE +ROOMS +SOCKETS +HEALTH +DEADLINE$/);
      expect(lines[1]).toMatch(/^b1 +up +0 +0 +up +-$/);
      expect(lines[2]).toMatch(/^b2 +draining +0 +0 +up +\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ \(in [45]m \d+s\)$/);
      expect(lines[3]).toMatch(/^b3 +up +0 +0 +up +-$/);
      // Columns line up: STATE starts at the same place in every row.
      expect(new Set(lines.slice(0, 4).map((l) => l.search(/(STATE|up|draining)/))).size).toBe(1);
      expect(s.stdout).toContain(`this gateway: 0 live sockets in 0 rooms (http://127.0.0.1:${gw.adminPort})`);
      expect(lines.length).toBeLessThan(10);
    } finally {
      await runCliHere(['undrain', 'b2'], env);
    }
  });

  it('in a pipe: one tab-separated row per backend; --json: stable fields', async () => {
    const s = await runCliHere(['status'], env);
    expect(s).toEqual({ code: 0, stdout: 'b1\tup\t0\t0\tup\t-\nb2\tup\t0\t0\tup\t-\nb3\tup\t0\t0\tup\t-\n', stderr: '' });
    const j = JSON.parse((await runCliHere(['status', '--json'], env)).stdout) as { backends: Record<string, unknown>[] };
    expect(Object.keys(j).sort()).toEqual(['backends', 'degraded', 'rooms', 'sockets']);
    expect(j.backends.map((b) => Object.keys(b).sort())).toEqual([BACKEND_KEYS, BACKEND_KEYS, BACKEND_KEYS]);
    expect(j.backends.map((b) => [b.id, b.url])).toEqual(backends.map((b) => [b.id, b.url]));
  });

  it('exits 0 quietly when the reader is gone', async () => {
    const runs = [['status'], ['status', '--json'], ['undrain', 'b1']];
    const results = await Promise.all(runs.map((args) => runCliPiped(args, 'true', env)));
    for (const [i, args] of runs.entries()) expect(results[i], args.join(' ')).toEqual({ code: 0, stdout: '', stderr: '' });
  });
});

describe('admin API errors: the message in either shape, one hint line', () => {
  it('the gateway\'s own errors: unknown backend (2), wrong token (2)', async () => {
    const unknown = await runCliHere(['drain', 'zz'], env);
    expect(unknown).toEqual({ code: 2, stdout: '', stderr: 'roomgate: drain zz: 404 no backend "zz"\nhint: roomgate status lists the backend ids\n' });
    const wrong = await runCliHere(['maintenance', 'b1', '--token', 'wrong-token-0123456789'], env);
    expect(wrong.code).toBe(2);
    expect(wrong.stderr.split('\n')).toEqual([
      'roomgate: maintenance b1: 401 missing or wrong bearer token: send Authorization: Bearer <admin.token>',
      "hint: give the gateway's admin.token with --token or $ROOMGATE_ADMIN_TOKEN (drain and undrain: or a drain token, $ROOMGATE_DRAIN_TOKENS)",
      '',
    ]);
  });

  it('without an admin token, drain and undrain send the first of $ROOMGATE_DRAIN_TOKENS; maintenance is refused it (403, 2)', async () => {
    // The backends listen on 127.0.0.1, where the CLI runs: each is the caller's own backend.
    const pod = { ROOMGATE_ADMIN_URL: env.ROOMGATE_ADMIN_URL as string, ROOMGATE_DRAIN_TOKENS: `${DRAIN},some-other-token-0123456789` };
    expect(await runCliHere(['drain', 'b2', '--handoff', '--deadline', '1m'], pod)).toMatchObject({ code: 0, stdout: expect.stringMatching(/^b2\tdraining\t/) });
    expect(await runCliHere(['undrain', 'b2'], pod)).toEqual({ code: 0, stdout: 'b2\tup\t-\n', stderr: '' });
    const m = await runCliHere(['maintenance', 'b2'], { ...pod, ROOMGATE_ADMIN_TOKEN: DRAIN });
    expect(m.code).toBe(2);
    expect(m.stderr.split('\n')[0]).toBe('roomgate: maintenance b2: 403 this token may only drain and undrain a backend; this write needs admin.token');
    // maintenance never falls back to a drain token: nothing sent is a wrong token.
    expect((await runCliHere(['maintenance', 'b2'], pod)).stderr).toMatch(/^roomgate: maintenance b2: 401 missing or wrong bearer token/);
  });

  it('{"error": {"code", "message"}} and a body that is not JSON', async () => {
    const answers: Record<string, [number, string]> = {
      '/backends/b9/drain': [404, JSON.stringify({ error: { code: 'not_found', message: 'no backend "b9"' } })],
      '/backends': [500, 'upstream exploded\n'],
    };
    const fake = http.createServer((req, res) => {
      const [status, body] = answers[req.url ?? ''] ?? [404, '{}'];
      req.resume();
      res.writeHead(status, { 'content-type': 'application/json' }).end(body);
    });
    await new Promise<void>((r) => fake.listen(0, '127.0.0.1', r));
    try {
      const admin = `http://127.0.0.1:${(fake.address() as AddressInfo).port}`;
      const d = await runCliHere(['drain', 'b9', '--admin', admin, '--token', TOKEN]);
      expect(d).toEqual({ code: 2, stdout: '', stderr: 'roomgate: drain b9: 404 no backend "b9"\nhint: roomgate status lists the backend ids\n' });
      const s = await runCliHere(['status', '--admin', admin]);
      expect(s).toEqual({ code: 1, stdout: '', stderr: 'roomgate: status: 500 upstream exploded\nsee: roomgate status --help\n' });
    } finally {
      fake.closeAllConnections();
      await new Promise((r) => fake.close(r));
    }
  });
});
