// The demo (`roomgate start` with no backends and no discovery) shows its own features: it listens
// on loopback only unless a host is given, and with no configuration file it generates the cookie
// secret, admin token and API token it needs when none is in the environment, prints them once in
// the banner with a command that uses each, and those commands work as printed; every page the
// banner links answers. With a configuration file, or outside demo mode, nothing is generated.
// The commands the banner prints run as printed (sh, the binary); the other commands this file runs
// against a demo run in this process (runCliHere: the CLI's run(), as the binary calls it).
import http from 'node:http';
import { connect } from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { httpRequest, startGateway, stop, stopAllWith, waitFor, writeConfig, type GatewayProc } from '../support/processes.js';
import { closeServer, listenOnLoopback } from '../support/servers.js';
import { runCliHere } from './in-process.js';
import { freePortRange, runPrinted } from './support.js';

const started: GatewayProc[] = [];
const demoPids: number[] = [];
const closeAfter: http.Server[] = [];

afterAll(async () => {
  // SIGTERM: the gateway stops its demo backends; anything left is killed.
  await Promise.all(started.map((g) => stop(g, 'SIGTERM', 10_000)));
  for (const pid of demoPids) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone already
    }
  }
  // Gracefully: a demo whose start timed out is not in `started` and still has its demo backends.
  await stopAllWith({ graceful: true });
  await Promise.all(closeAfter.map(closeServer));
});

/**
 * A demo gateway with no secret, no token and no host in its environment (startGateway sets some);
 * with no configuration file unless `config` is given. A demo with a configuration file runs one
 * demo backend instead of 3 (each is a process; those tests count none).
 */
async function startDemo(o: { env?: Record<string, string>; config?: Record<string, unknown>; args?: string[] } = {}): Promise<GatewayProc> {
  const basePort = await freePortRange(3);
  const gw = await startGateway({
    config: o.config ? { demo: { basePort, backends: 1 }, listen: { port: 0 }, ...o.config } : false,
    env: { ROOMGATE_HOST: '', ROOMGATE_COOKIE_SECRETS: '', ROOMGATE_DEMO_BASE_PORT: String(basePort), ...o.env },
    args: o.args ?? [],
  });
  started.push(gw);
  demoPids.push(...gw.logs().filter((l) => l.msg === 'demo backend started').map((l) => Number(l.backendPid)));
  return gw;
}

let plainDemo: Promise<GatewayProc> | undefined;

/**
 * One demo as startDemo() starts it, for the tests of its address, banner, pages and printed
 * commands (the one test that drains a backend and writes runs after those that only read).
 */
function sharedDemo(): Promise<GatewayProc> {
  plainDemo ??= startDemo();
  return plainDemo;
}

async function banner(gw: GatewayProc): Promise<string> {
  return waitFor('the demo banner', 10_000, () => (gw.stderr.some((l) => l.startsWith('Kill a backend')) ? gw.stderr.join('\n') : undefined));
}

function listening(gw: GatewayProc): Record<string, unknown> {
  return gw.logs().find((l) => l.msg === 'listening') ?? {};
}

/** Connects to 127.0.0.2: accepted by a socket bound to 0.0.0.0, refused by one bound to 127.0.0.1. */
function reachableBeyond127001(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect({ host: '127.0.0.2', port, timeout: 3_000 });
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
    s.once('timeout', () => {
      s.destroy();
      resolve(false);
    });
  });
}

/** The banner line that starts with `label`, without it. */
function line(text: string, label: string): string {
  const l = text.split('\n').find((x) => x.trimStart().startsWith(label));
  expect(l, `banner line "${label}" in:\n${text}`).toBeDefined();
  return (l as string).trimStart().slice(label.length).trim();
}

describe('the demo', () => {
  it('listens on 127.0.0.1 only, and says so', async () => {
    const gw = await sharedDemo();
    expect(listening(gw).host).toBe('127.0.0.1');
    expect(await reachableBeyond127001(gw.port)).toBe(false);
    expect(await banner(gw)).toContain(`roomgate demo: http://localhost:${gw.port} in front of 3 demo backends (this machine only)`);
  });

  it('every page the banner links answers 200; GET / is an index page linking the game rooms and the lobby', async () => {
    const gw = await sharedDemo();
    const text = await banner(gw);
    // Every URL in the banner but the curl line's (a PUT, run as printed above).
    const urls = text
      .split('\n')
      .filter((l) => !l.includes('curl '))
      .flatMap((l) => [...l.matchAll(/https?:\/\/[^\s']+/g)].map((m) => m[0]));
    const base = `http://localhost:${gw.port}`;
    const admin = `http://127.0.0.1:${gw.adminPort}`;
    expect(urls).toEqual(
      expect.arrayContaining([
        `${base}/`,
        `${base}/game/chess/`,
        `${base}/game/poker/`,
        `${base}/r/tetris/game/tetris/`,
        `${base}/_roomgate/lobby`,
        `${admin}/_roomgate/`,
        `${admin}/backends`,
      ]),
    );
    // No room is called "lobby": /_roomgate/lobby is the lobby page.
    expect(text).not.toMatch(/\/game\/lobby\//);
    for (const url of urls) {
      if (url === admin) continue; // the --admin value of a command line
      const res = await fetch(url, { signal: AbortSignal.timeout(5_000) });
      expect(res.status, url).toBe(200);
      await res.arrayBuffer();
    }
    const index = await fetch(`${base}/`, { signal: AbortSignal.timeout(5_000) });
    const html = await index.text();
    expect(index.headers.get('content-type')).toMatch(/^text\/html/);
    const links = [...html.matchAll(/href="([^"]+)"/g)].map((m) => m[1]);
    expect(links).toEqual(['/game/chess/', '/game/poker/', '/game/tetris/', '/r/tetris/game/tetris/', '/_roomgate/lobby']);
    for (const l of links) {
      const res = await fetch(`${base}${l}`, { signal: AbortSignal.timeout(5_000) });
      expect(res.status, l).toBe(200);
      await res.arrayBuffer();
    }
  });

  it('generates a cookie secret, an admin token, an API token and a push token, prints them once, and the printed commands work', async () => {
    // The shared demo, after the tests that only read from it: this one drains a backend and writes.
    const gw = await sharedDemo();
    const text = await banner(gw);
    const admin = `http://127.0.0.1:${gw.adminPort}`;
    expect(line(text, 'the status page:')).toBe(`${admin}/_roomgate/`);
    expect(line(text, 'the lobby:')).toBe(`http://localhost:${gw.port}/_roomgate/lobby`);
    expect(line(text, 'the admin API:')).toMatch(new RegExp(`^${admin}/backends`));

    const drain = line(text, 'admin token:');
    const sign = line(text, 'cookie secret:');
    const curl = line(text, 'API token:');
    const pushCurl = line(text, 'push token:');
    const adminToken = /^ROOMGATE_ADMIN_TOKEN=(\S+) npx roomgate drain demo-2 --admin (\S+)$/.exec(drain);
    const secret = /^ROOMGATE_COOKIE_SECRETS=(\S+) npx roomgate sign (\S+)$/.exec(sign);
    const apiToken = /Bearer (\S+)'/.exec(curl);
    const pushToken = /Bearer (\S+)'/.exec(pushCurl);
    expect([adminToken?.[2], secret?.[2]]).toEqual([admin, 'chess']);
    const secrets = [adminToken?.[1], secret?.[1], apiToken?.[1], pushToken?.[1]] as string[];
    for (const s of secrets) expect(s).toMatch(/^[A-Za-z0-9_-]{32}$/);
    expect(new Set(secrets).size).toBe(4);
    // Once: in the banner, never in the log.
    for (const s of secrets) {
      expect(gw.stderr.join('\n').split(s)).toHaveLength(2);
      expect(gw.lines.join('\n')).not.toContain(s);
    }

    // The two command lines are independent (sign reads no gateway): run at once.
    const [d, cookie] = await Promise.all([runPrinted(drain), runPrinted(sign)]);
    // The admin token drains a backend.
    expect(d.stderr).toBe('');
    expect(d.stdout).toMatch(/^demo-2\tdraining\t\S+\n$/);
    // The signed cookie alone takes a request to the room's backend.
    expect(cookie.code, cookie.stderr).toBe(0);
    const page = await httpRequest(gw.port, '/game/chess/');
    const withCookie = await httpRequest(gw.port, '/anything', { headers: { cookie: `roomgate_room=${cookie.stdout.trim()}` } });
    expect(withCookie.headers['x-backend-id']).toBe(page.headers['x-backend-id']);
    // The API token writes room metadata (the curl line as printed).
    const put = await runPrinted(curl);
    expect(put.code, put.stderr).toBe(0);
    expect(JSON.parse(put.stdout)).toMatchObject({ room: 'chess', meta: { title: 'The chess room', status: 'waiting' }, pinned: true });
    const room = await httpRequest(gw.port, '/_roomgate/api/rooms/chess');
    expect(JSON.parse(room.body)).toMatchObject({ meta: { title: 'The chess room' } });
    // The push token is taken (the curl line as printed).
    const pushed = await runPrinted(pushCurl);
    expect(pushed.code, pushed.stderr).toBe(0);
    expect(JSON.parse(pushed.stdout)).toMatchObject({ room: 'chess', backend: page.headers['x-backend-id'] });
  });

  it('start --json: the banner as one JSON line on stdout', async () => {
    const gw = await startDemo({ args: ['--json'], env: { ROOMGATE_ADMIN_TOKEN: 'configured-admin-token-0123' } });
    const j = await waitFor('the JSON banner', 10_000, () => gw.logs().find((l) => l.event === 'demo'));
    expect(j).toMatchObject({
      url: `http://localhost:${gw.port}`,
      listen: '127.0.0.1',
      adminUrl: `http://127.0.0.1:${gw.adminPort}`,
      pages: { status: `http://127.0.0.1:${gw.adminPort}/_roomgate/`, lobby: `http://localhost:${gw.port}/_roomgate/lobby` },
      // A configured token is used, never replaced, and not printed.
      generated: { adminToken: null, cookieSecret: expect.any(String), apiToken: expect.any(String) },
    });
    expect((j.backends as unknown[]).length).toBe(3);
    expect(JSON.stringify(j)).not.toContain('configured-admin-token-0123');
    expect(gw.stderr.join('\n')).not.toContain('roomgate demo:');
    const ok = await runCliHere(['drain', 'demo-1', '--admin', `http://127.0.0.1:${gw.adminPort}`, '--token', 'configured-admin-token-0123']);
    expect(ok.code, ok.stderr).toBe(0);
  });

  it('listens where --host, ROOMGATE_HOST or listen.host says, when given', async () => {
    // Three demos, one after another: started at once on a loaded 2-core machine, one of them
    // once took over startGateway's 30 s to listen (the CPU spent is the same either way).
    const fromEnv = await startDemo({ env: { ROOMGATE_HOST: '0.0.0.0' } });
    const fromFlag = await startDemo({ args: ['--host', '0.0.0.0'] });
    const fromFile = await startDemo({ config: { listen: { port: 0, host: '0.0.0.0' } } });
    expect(listening(fromEnv).host).toBe('0.0.0.0');
    expect(await reachableBeyond127001(fromEnv.port)).toBe(true);
    expect(await banner(fromEnv)).toContain('(listening on 0.0.0.0)');
    expect(listening(fromFlag).host).toBe('0.0.0.0');
    expect(await reachableBeyond127001(fromFlag.port)).toBe(true);
    expect(listening(fromFile).host).toBe('0.0.0.0');
  });

  it('with a configuration file: nothing generated, the configured secrets (or none) are used', async () => {
    const gw = await startDemo({ config: { listen: { port: 0 } }, env: { ROOMGATE_API_TOKENS: 'configured-api-token-0123456789' } });
    const text = await banner(gw);
    expect(listening(gw).host).toBe('127.0.0.1');
    expect(text).not.toContain('Generated for this run');
    expect(text).toContain('<your admin token>');
    expect(text).toContain('<your cookie secret>');
    expect(text).not.toContain('configured-api-token-0123456789');
    // No admin token: admin writes stay refused.
    const drain = await runCliHere(['drain', 'demo-1', '--admin', `http://127.0.0.1:${gw.adminPort}`, '--token', 'x'.repeat(30)]);
    expect(drain.code).not.toBe(0);
    expect(drain.stderr).toContain('admin writes are disabled');
  });
});

describe('outside demo mode', () => {
  it('generates nothing: no admin token, no API token, and the default host', async () => {
    // The backend is never reached by these requests: an in-process server answering 200 will do.
    const backend = http.createServer((_req, res) => res.end('ok'));
    closeAfter.push(backend);
    const gw = await startGateway({ backends: [`solo=${await listenOnLoopback(backend)}`], env: { ROOMGATE_HOST: '' } });
    started.push(gw);
    expect(listening(gw).host).toBe('0.0.0.0');
    expect(gw.stderr.join('\n')).not.toContain('roomgate demo');
    const drain = await httpRequest(gw.adminPort, '/backends/solo/drain', { method: 'POST', headers: { authorization: 'Bearer x'.padEnd(30, 'x') } });
    expect(drain.status).toBe(403);
    expect(drain.body).toContain('admin writes are disabled');
    const put = await httpRequest(gw.port, '/_roomgate/api/rooms/r1/meta', { method: 'PUT', body: '{}', headers: { authorization: 'Bearer x'.padEnd(30, 'x') } });
    expect(put.status).toBe(403);
  });

  it('check-config says what the demo will generate: nothing with a configuration file', async () => {
    const r = await runCliHere(['check-config']);
    expect(r.stdout).toContain('note: no backends configured; start will run 3 demo backends, on 127.0.0.1 unless a host is given (--host, ROOMGATE_HOST, listen.host)');
    expect(r.stdout).toContain('note: no cookie secret, admin token, API token or push token configured; start will generate them for the demo and print them in its banner');
    const withToken = await runCliHere(['check-config'], { ROOMGATE_ADMIN_TOKEN: 'configured-admin-token-0123' });
    expect(withToken.stdout).toContain('note: no cookie secret, API token or push token configured;');
    const withFile = await runCliHere(['check-config', '--config', writeConfig({})]);
    expect(withFile.stdout).toContain('note: no backends configured;');
    expect(withFile.stdout).not.toContain('generate');
  });
});
