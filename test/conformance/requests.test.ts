// The request corpus against the real gateway (a child process) in front of the byte-logging
// backend. Each case: exact bytes from its own loopback address; the client's statuses and close;
// exactly the requests the backend parsed for that address; exactly one X-Forwarded-For equal to
// that address on each; the gateway alive afterwards. Finally: nothing reached the backend that no
// client can claim (a smuggled request carries no X-Forwarded-For of ours).
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, stopAll, type GatewayProc } from '../support/processes.js';
import { startRawBackend, type RawBackend } from './backend.js';
import { aliveProblem } from './raw.js';
import { GATEWAY_CONFIGS, REQUEST_CASES, SPLIT_CASE } from './request-cases.js';
import { ClientAddresses, judgeRequest, runRequestCase, unclaimed } from './runner.js';

let gw: GatewayProc;
let be: RawBackend;
const clients = new ClientAddresses(10_000);
const newClient = (): string => clients.next();

beforeAll(async () => {
  be = await startRawBackend();
  gw = await startGateway({ backends: [`b1=${be.url}`], config: GATEWAY_CONFIGS.base });
});

afterAll(async () => {
  await stopAll();
  await be.close();
});

describe.concurrent('request corpus', () => {
  for (const c of REQUEST_CASES) {
    it(`${c.cls}: ${c.name}`, async ({ expect }) => {
      const o = await runRequestCase(gw.port, be, c, newClient());
      const { problems } = judgeRequest(c, o);
      const dead = await aliveProblem(gw);
      if (dead) problems.push(dead);
      expect(problems).toEqual([]);
    });
  }
});

describe('a pipeline split at every byte boundary', () => {
  it('gives the same answers and the same backend requests for every split', async () => {
    const bytes = SPLIT_CASE.parts.join('');
    const failures: string[] = [];
    const splits = Array.from({ length: bytes.length - 1 }, (_v, i) => i + 1);
    // A few at a time: each split is its own connection from its own address.
    for (let i = 0; i < splits.length; i += 12) {
      await Promise.all(
        splits.slice(i, i + 12).map(async (k) => {
          const o = await runRequestCase(gw.port, be, SPLIT_CASE, newClient(), { parts: [bytes.slice(0, k), bytes.slice(k)], gapMs: 15 });
          for (const p of judgeRequest(SPLIT_CASE, o).problems) failures.push(`split at ${k}: ${p}`);
        }),
      );
    }
    expect(failures).toEqual([]);
    expect(await aliveProblem(gw)).toBeNull();
  });
});

describe('a client that resets its connection right after a request', () => {
  // Found by the fuzzer (npm run fuzz -- --seed 2026): the request may still be forwarded, but
  // never with anything but the client's own address in X-Forwarded-For (an app that trusts the
  // header would otherwise not see who sent it).
  it('whatever reaches the backend carries the client\'s address', async () => {
    const sent: { address: string; target: string }[] = [];
    for (let i = 0; i < 20; i++) {
      const address = newClient();
      const target = `/reset-${i}`;
      sent.push({ address, target });
      await new Promise<void>((resolve) => {
        const s = net.connect({ port: gw.port, host: '127.0.0.1', localAddress: address });
        const timer = setTimeout(() => {
          s.destroy();
          resolve();
        }, 2_000);
        s.on('error', () => undefined);
        s.on('close', () => {
          clearTimeout(timer);
          resolve();
        });
        s.on('connect', () => {
          s.write(`GET ${target} HTTP/1.1\r\nHost: a.example\r\n\r\n`);
          s.resetAndDestroy();
        });
      });
    }
    await new Promise((r) => setTimeout(r, 300));
    const wrong = sent.flatMap(({ address, target }) =>
      be.requests.filter((r) => r.target === target && (r.xff.length !== 1 || r.xff[0] !== address)).map((r) => `${target}: X-Forwarded-For ${JSON.stringify(r.xff)}, expected ["${address}"]`),
    );
    expect(wrong).toEqual([]);
    expect(await aliveProblem(gw)).toBeNull();
  });
});

describe('after the corpus', () => {
  it('the backend parsed no request that no client can claim', async () => {
    await new Promise((r) => setTimeout(r, 300));
    // The reset test above checks its own requests (an "unknown" X-Forwarded-For is its finding).
    expect(unclaimed(be, clients.all).filter((r) => !r.target.startsWith('/reset-')).map((r) => `${r.method} ${r.target} XFF=${JSON.stringify(r.xff)}`)).toEqual([]);
    expect(be.errors()).toEqual([]);
  });
});
