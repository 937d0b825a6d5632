// The front-parity suite: every row of cases.ts through every front it can be expressed
// on (fronts.ts: plain HTTP/1.1 with and without the byte-level front, HTTP/1.1 over TLS, HTTP/2,
// HTTP/2 extended CONNECT, a `--workers 2` process), each from a loopback address of its own.
// Each front must give the row's answer class and put the row's request at the backend (method,
// path, X-Forwarded-*, ownership fields, no hop-by-hop or client X-Roomgate-*, body bytes); the
// fronts must agree with each other (parity) unless the row records a disagreement. Rows in
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ClientAddresses, claimedClient } from '../conformance/runner.js';
import { FRONTS, OWN, PUBLIC, rows, type Front, type Row } from './cases.js';
import { applies, PARITY_HELLO, schemeOf, startSuite, type Suite } from './fronts.js';
import type { Answer } from './clients.js';
import { expectationProblems, parityProblems, type FrontRun } from './judge.js';

let suite: Suite;
const clients = new ClientAddresses(300_000);

beforeAll(async () => {
  suite = await startSuite();
});

afterAll(async () => {
  await suite?.close();
});

async function runRow(row: Row): Promise<FrontRun[]> {
  if (row.handoff !== undefined) return suite.inHandoff(row.handoff, () => sendRow(row));
  return sendRow(row);
}

async function sendRow(row: Row): Promise<FrontRun[]> {
  const fronts = FRONTS.filter((f) => applies(row, f).run);
  return Promise.all(
    fronts.map(async (front: Front) => {
      const address = clients.next();
      const answer = placeholders(await suite.send(front, row, address), front);
      return { front, address, answer, forwarded: suite.backend.requests.filter((r) => claimedClient(r) === address) };
    }),
  );
}

/** The answer's Location and Refresh with the backend's own authority as OWN and the front's origin as PUBLIC. */
function placeholders(a: Answer, front: Front): Answer {
  const own = suite.backend.url.slice('http://'.length);
  const origin = `${schemeOf(front)}://a.example`;
  const norm = (v: string): string => v.replaceAll(own, OWN).replaceAll(origin, PUBLIC);
  return { ...a, location: (a.location ?? []).map(norm), refresh: (a.refresh ?? []).map(norm) };
}

describe('the table', () => {
  it('has at least 80 rows with unique names, and every front a row skips says why', () => {
    expect(rows.length).toBeGreaterThanOrEqual(80);
    const names = rows.map((r) => r.name);
    expect(new Set(names).size).toBe(names.length);
    for (const row of rows) {
      const run = FRONTS.filter((f) => applies(row, f).run);
      // Every row runs on at least the three plain HTTP/1.1 paths and the worker.
      for (const f of ['h1-lean', 'h1-node', 'h1-tls', 'worker'] as const) expect(run, `${row.name} runs on ${f}`).toContain(f);
      for (const f of FRONTS) {
        const a = applies(row, f);
        if (!a.run) expect(a.reason.length, `${row.name} on ${f}: a reason`).toBeGreaterThan(20);
      }
      // A recorded disagreement is for a front the row runs on.
      for (const f of Object.keys(row.differs ?? {}) as Front[]) expect(run, `${row.name}: differs on ${f}`).toContain(f);
    }
  });
});

// A few rows at a time (vitest's maxConcurrency, 5): each exchange has its own connection and
// client address, so rows never share anything but the gateways and the backend.
describe.concurrent('every front, every row', () => {
  for (const row of rows) {
    it(row.name, async ({ expect }) => {
      const runs = await runRow(row);
      const problems = [...runs.flatMap((r) => expectationProblems(row, r)), ...parityProblems(row, runs)];
      expect(problems).toEqual([]);
    });
  }
});

describe('after the table', () => {
  it('every request the backend parsed belongs to a client of the suite', () => {
    // roomgate's own hello calls (each gateway asks at start) are no client's.
    const stray = suite.backend.requests.filter((r) => !clients.all.has(claimedClient(r) ?? '') && !(r.method === 'POST' && r.target === PARITY_HELLO)).map((r) => `${r.method} ${r.target} XFF=${JSON.stringify(r.xff)}`);
    expect(stray).toEqual([]);
    expect(suite.backend.errors()).toEqual([]);
  });
});
