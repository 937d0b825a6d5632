// `roomgate check-backend`: the receiver checks (src/receiver-check/) sent to a real demo backend
// process with its own keys (every check passes), with keys that are not its own (the genuine calls
// fail), and to careless receivers made here on real sockets: one that takes everything (every
// forged call fails), one that crashes on a signature that is not ASCII, one that does not answer
// (a timeout, said so). Usage errors exit 2 with the fix. The command runs in this process
// (runCliHere); the Django example runs the same check in test/integration/django-channels.test.ts.
import { once } from 'node:events';
import http, { type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backendKeys } from '../../src/http/call-proof.js';
import { checkReceiver } from '../../src/receiver-check/run.js';
import { backendEnv, CALL_SECRET, startBackend, stopAll, type BackendProc } from '../support/processes.js';
import { runCliHere } from './in-process.js';

let demo: BackendProc;
const servers: Server[] = [];

beforeAll(async () => {
  demo = await startBackend('cb-1', ['--handoff-path', '/_roomgate/handoff', '--handoff-resume', 'on']);
}, 30_000);

afterAll(async () => {
  for (const s of servers) s.close();
  await stopAll();
});

/** A receiver on a real socket answering every request with `answer(path, headers)`. */
async function receiver(answer: (req: http.IncomingMessage) => { status: number; body?: string } | null): Promise<string> {
  const s = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      const a = answer(req);
      if (a === null) return; // never answers
      res.writeHead(a.status, a.body ? { 'Content-Type': 'application/json' } : {});
      res.end(a.body ?? '');
    });
  });
  s.listen(0, '127.0.0.1');
  await once(s, 'listening');
  servers.push(s);
  return `http://127.0.0.1:${(s.address() as AddressInfo).port}`;
}

const ownKeys = (id: string): Record<string, string> => ({ ROOMGATE_BACKEND_KEYS: backendEnv(id).ROOMGATE_BACKEND_KEYS as string });
const lines = (out: string): string[] => out.split('\n').filter(Boolean);

describe('roomgate check-backend', () => {
  it('passes every check against the demo backend with its own keys, and says what each saw', async () => {
    const r = await runCliHere(['check-backend', demo.url, '--id', 'cb-1'], ownKeys('cb-1'));
    expect(r.code, r.stdout + r.stderr).toBe(0);
    const out = lines(r.stdout);
    expect(out[0]).toBe(`cb-1 at ${demo.url}, signed with 1 key`);
    expect(out).toContain('pass  push: genuine (to a room no socket holds): 204');
    expect(out).toContain('pass  push: the genuine one replayed: 403');
    expect(out).toContain('pass  hello: genuine: 200 {"version":2,"messages":true,"resume":true}');
    // Its hello offers resume, so the resume handshake's checks run too (5 of the 38).
    expect(out).toContain('pass  resume handshake: proof made for the resume hook: 403');
    expect(out).toContain('pass  resume handshake: genuine, for a socket no export carried: 409');
    expect(out.filter((l) => l.startsWith('pass  '))).toHaveLength(38);
    expect(out.at(-1)).toBe('38 of 38 checks passed');
  });

  it('keys derived from the call secrets work the same; keys that are not its own fail the genuine calls (exit 1)', async () => {
    const derived = await runCliHere(['check-backend', demo.url, '--id', 'cb-1', '--json'], { ROOMGATE_CALL_SECRETS: CALL_SECRET });
    expect(derived.code).toBe(0);
    expect(JSON.parse(derived.stdout)).toMatchObject({ backend: 'cb-1', url: demo.url, passed: 38, failed: 0 });
    const other = await runCliHere(['check-backend', demo.url, '--id', 'cb-1', '--json'], { ROOMGATE_BACKEND_KEYS: backendKeys(['another-call-secret-0123456789abcdef'], 'cb-1').join(',') });
    expect(other.code).toBe(1);
    const j = JSON.parse(other.stdout) as { failed: number; checks: { name: string; ok: boolean; saw: string }[] };
    expect(j.checks.filter((c) => !c.ok).map((c) => `${c.name}: ${c.saw}`)).toEqual(['push: genuine (to a room no socket holds): 403', 'hello: genuine: 403 {"error":"handoff refused: bad-signature"}']);
    // The same backend checked under another id: every genuine call is made for a backend it is not.
    const misnamed = await runCliHere(['check-backend', demo.url, '--id', 'cb-2'], ownKeys('cb-2'));
    expect(misnamed.code).toBe(1);
    expect(misnamed.stdout).toContain('FAIL  push: genuine (to a room no socket holds): expected a 2xx, saw 403');
  });

  it('a receiver whose hello offers resume and that opens every handshake fails every resume check (it would attach a forged socket)', async () => {
    const url = await receiver((req) => (req.url?.endsWith('/hello') ? { status: 200, body: '{"version":2,"messages":true,"resume":true}' } : { status: 403 }));
    const server = servers.at(-1) as Server;
    server.on('upgrade', (_req, socket) => socket.end('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n'));
    const results = await checkReceiver({ url, id: 'opens', keys: backendKeys(['x'.repeat(32)], 'opens'), pushPath: null, handoffPath: '/_roomgate/handoff' });
    const resume = results.filter((r) => r.name.startsWith('resume handshake: '));
    expect(resume).toHaveLength(5);
    expect(resume.every((r) => !r.ok && r.saw === '101')).toBe(true);
    // Without resume in the hello, no handshake is sent.
    const plain = await receiver((req) => (req.url?.endsWith('/hello') ? { status: 200, body: '{"version":2,"messages":true}' } : { status: 403 }));
    const none = await checkReceiver({ url: plain, id: 'opens', keys: backendKeys(['x'.repeat(32)], 'opens'), pushPath: null, handoffPath: '/_roomgate/handoff' });
    expect(none.filter((r) => r.name.startsWith('resume handshake: '))).toEqual([]);
  });

  it('a receiver that takes everything fails every forged call, and passes only the genuine ones', async () => {
    const url = await receiver((req) => (req.url?.endsWith('/hello') ? { status: 200, body: '{"version":1}' } : { status: 204 }));
    const results = await checkReceiver({ url, id: 'careless', keys: backendKeys(['x'.repeat(32)], 'careless'), pushPath: '/_roomgate/push', handoffPath: '/_roomgate/handoff' });
    expect(results.filter((r) => r.ok).map((r) => r.name)).toEqual(['push: genuine (to a room no socket holds)', 'hello: genuine']);
    expect(results.find((r) => r.name === 'push: unsigned')).toEqual({ name: 'push: unsigned', ok: false, want: '403', saw: '204' });
    const r = await runCliHere(['check-backend', url, '--id', 'careless', '--skip', 'handoff'], { ROOMGATE_CALL_SECRETS: 'x'.repeat(32) });
    expect(r.code).toBe(1);
    expect(r.stdout).toContain('FAIL  push: stale (2 minutes old): expected 403, saw 204');
    expect(r.stdout).not.toContain('hello');
    expect(lines(r.stdout).at(-1)).toBe('15 of 16 checks failed');
  });

  it('a crash (500) on a signature that is not ASCII, and a hook that never answers, are failures named as such', async () => {
    const url = await receiver((req) => {
      if (req.url?.endsWith('/export')) return null;
      if (/[^\x20-\x7e]/.test(String(req.headers['x-roomgate-signature'] ?? ''))) return { status: 500 };
      return { status: 403 };
    });
    const results = await checkReceiver({ url, id: 'b', keys: backendKeys(['y'.repeat(32)], 'b'), pushPath: '/p', handoffPath: '/h' }, { timeoutMs: 300 });
    const failed = results.filter((r) => !r.ok);
    expect(failed.map((r) => `${r.name}: ${r.saw}`)).toEqual([
      'push: genuine (to a room no socket holds): 403',
      'push: a signature that is not ASCII: 500',
      'hello: genuine: 403',
      'export: unsigned: no answer in 300 ms',
      'export: proof made for hello: no answer in 300 ms',
      'export: made for another backend: no answer in 300 ms',
    ]);
  });

  it('bad usage exits 2 with the fix; an unreachable gateway exits 1', async () => {
    const noId = await runCliHere(['check-backend', demo.url], ownKeys('cb-1'));
    expect(noId.code).toBe(2);
    expect(noId.stderr).toContain("a URL needs the backend's id in roomgate: --id ID");
    const noKey = await runCliHere(['check-backend', demo.url, '--id', 'cb-1']);
    expect(noKey.code).toBe(2);
    expect(noKey.stderr).toContain('no key: set ROOMGATE_BACKEND_KEYS');
    const badKey = await runCliHere(['check-backend', demo.url, '--id', 'cb-1'], { ROOMGATE_BACKEND_KEYS: 'secret' });
    expect(badKey.code).toBe(2);
    expect(badKey.stderr).toContain('ROOMGATE_BACKEND_KEYS: a backend key is "rgk1.');
    const skip = await runCliHere(['check-backend', demo.url, '--id', 'cb-1', '--skip', 'pushes'], ownKeys('cb-1'));
    expect(skip.code).toBe(2);
    expect(skip.stderr).toContain('--skip "pushes": expected push or handoff');
    const path = await runCliHere(['check-backend', demo.url, '--id', 'cb-1', '--push-path', 'push'], ownKeys('cb-1'));
    expect(path.code).toBe(2);
    expect(path.stderr).toContain('--push-path "push": expected a path starting with "/"');
    const closed = await receiver(() => ({ status: 204 }));
    servers.pop()?.close();
    const byId = await runCliHere(['check-backend', 'cb-1', '--admin', closed], ownKeys('cb-1'));
    expect(byId.code).toBe(1);
    expect(byId.stderr).toContain('is the gateway running?');
  });
});
