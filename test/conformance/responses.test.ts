// The response corpus against the real gateway: the byte-logging backend answers each client's
// request with that case's scripted bytes (chosen by the client's source address, which reaches
// the backend as X-Forwarded-For). One case at a time and one idle backend connection, so a
// follow-up request from a second client rides the connection the scripted answer left behind:
// whatever that answer left over must never reach it. The corpus runs once per way an answer can
// be relayed (VARIANTS). The variants run concurrently, each with its own backend and gateway;
// within a variant the cases run one at a time.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, stop, stopAll, waitFor, type GatewayProc } from '../support/processes.js';
import { startRawBackend, type Answer, type RawBackend } from './backend.js';
import { aliveProblem } from './raw.js';
import { concrete, PIN_RESPONSE_CASES, RESPONSE_CASES, type ResponseCase } from './response-cases.js';
import { ClientAddresses, handshakeConnProblems, responseProblems, runResponseCase, scriptedByClient, unclaimed } from './runner.js';

const clients = new ClientAddresses(20_000);
const newClient = (): string => clients.next();

// The same hostile answers through each way a page can take: the byte-level page path, node:http's,
// and the page cache's own fetch (every case's answer is fetched by the cache: none has freshness,
// and uncacheableMs 0 keeps later cases from skipping it).
// Each twice: as configured by default, and with room.pinInject on (the corpus' GET /r then has the
// room "r", from room.pagePaths): the pin cases (PIN_RESPONSE_CASES) hold their `pinExpect` there,
// every other case its own expectation (none of them is an HTML page).
// (No room cookie set on pages: the corpus' answers are checked for fields they must lack.)
const PIN = { room: { pinInject: true, pagePaths: ['/{room}'] }, cookie: { setOnPages: false } };
const VARIANTS = [
  { name: 'byte-level page path', extra: {}, pin: false },
  { name: 'node:http page path', extra: { proxy: { leanPages: false } }, pin: false },
  { name: 'page cache fetches', extra: { cache: { paths: ['/'], uncacheableMs: 0 } }, pin: false },
  { name: 'byte-level page path, pin injection', extra: PIN, pin: true },
  { name: 'node:http page path, pin injection', extra: { ...PIN, proxy: { leanPages: false } }, pin: true },
  { name: 'page cache fetches, pin injection', extra: { ...PIN, cache: { paths: ['/'], uncacheableMs: 0 } }, pin: true },
] as const;

afterAll(async () => {
  await stopAll();
});

describe.concurrent.each(VARIANTS)('response corpus: $name', ({ extra, pin }) => {
  let be: RawBackend;
  let gw: GatewayProc;
  const scripts = new Map<string, Answer>();
  beforeAll(async () => {
    const byClient = scriptedByClient(scripts);
    be = await startRawBackend({ answer: byClient, upgrade: byClient });
    const proxy = { websocketPaths: ['/ws/live/'], maxIdleSocketsPerBackend: 1, responseTimeoutMs: 3_000, rewriteLocation: true, ...('proxy' in extra ? extra.proxy : {}) };
    gw = await startGateway({ backends: [`b1=${be.url}`], config: { health: { path: null }, ...extra, proxy } });
  });
  afterAll(async () => {
    await stop(gw);
    await be.close();
  });

  const warnings = (): number => gw.logs().filter((l) => l.level === 'warn').length;

  const cases: readonly ResponseCase[] = [...RESPONSE_CASES, ...PIN_RESPONSE_CASES.map((c) => (pin ? { ...c, expect: c.pinExpect } : c))];
  for (const corpusCase of cases) {
    it(`${corpusCase.cls}: ${corpusCase.name}`, { concurrent: false }, async () => {
      const c = concrete(corpusCase, be.url.slice('http://'.length), 'http://a.example');
      const address = newClient();
      scripts.set(address, c.answer);
      const warnedBefore = warnings();
      const o = await runResponseCase(gw.port, c, address, newClient());
      const problems = responseProblems(c, o);
      if (c.expect.logged) {
        await waitFor('the warning', 3_000, () => warnings() > warnedBefore).catch(() => problems.push('no warning logged'));
      }
      if (c.request === 'upgrade') problems.push(...handshakeConnProblems(be, address));
      const dead = await aliveProblem(gw);
      if (dead) problems.push(dead);
      expect(problems).toEqual([]);
    });
  }

  it('the backend parsed no request that no client can claim', { concurrent: false }, async () => {
    await new Promise((r) => setTimeout(r, 200));
    expect(unclaimed(be, clients.all).map((r) => `${r.method} ${r.target} XFF=${JSON.stringify(r.xff)}`)).toEqual([]);
  });
});
