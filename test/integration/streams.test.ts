// api.maxStreams against a real gateway: the Server-Sent Event streams roomgate serves itself
// (the lobby stream and the status page's stream) are limited per port, one set of slots for the
// public port's lobby and status streams together and one for the admin port's status streams.
// One stream past the limit gets 503 with Retry-After and the API's error shape; a stream that
// closes frees its slot.
import http from 'node:http';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startBackends, startGateway, stopAll, waitFor, withTimeout, type GatewayProc } from '../support/processes.js';

const MAX = 3;
const LOBBY = '/_roomgate/api/lobby/stream';
const STATUS = '/_roomgate/status/stream';

let gw: GatewayProc;

beforeAll(async () => {
  const backends = await startBackends(['b1']);
  gw = await startGateway({ backends, config: { api: { maxStreams: MAX }, status: { public: 'open' } } });
});

interface Opened {
  readonly status: number;
  readonly headers: http.IncomingHttpHeaders;
  /** The whole body of a refusal; '' for a stream (it is not read to the end). */
  readonly body: string;
  /** Ends the stream from the client side and waits for its socket to close. */
  close(): Promise<void>;
}

const open = new Set<Opened>();

/** Opens an event stream; resolves with a stream's head (its first event read) or a refusal's whole answer. */
function openStream(port: number, path: string): Promise<Opened> {
  return withTimeout(
    new Promise<Opened>((resolve, reject) => {
      const req = http.get({ host: '127.0.0.1', port, path, agent: false }, (res) => {
        const closed = new Promise<void>((r) => res.socket.once('close', () => r()));
        const close = async (): Promise<void> => {
          req.destroy();
          await withTimeout(closed, 5_000, `${path}: socket close`);
          open.delete(opened);
        };
        const status = res.statusCode ?? 0;
        let text = '';
        const opened: Opened = {
          status,
          headers: res.headers,
          get body() {
            return status === 200 ? '' : text;
          },
          close,
        };
        open.add(opened);
        res.setEncoding('utf8');
        if (status !== 200) {
          res.on('data', (c: string) => (text += c));
          res.on('end', () => resolve(opened));
          return;
        }
        // A stream: the slot is held once its first event arrives.
        const onData = (c: string): void => {
          text += c;
          if (/\nevent: \w+\ndata: /.test(`\n${text}`)) {
            res.off('data', onData);
            res.resume();
            resolve(opened);
          }
        };
        res.on('data', onData);
      });
      req.on('error', reject);
    }),
    5_000,
    `GET ${path}`,
  );
}

afterEach(async () => {
  await Promise.all([...open].map((s) => s.close()));
});

afterAll(stopAll);

function expectFull(r: Opened, what: string): void {
  expect(r.status, what).toBe(503);
  expect(r.headers['retry-after'], what).toBe('5');
  expect(r.headers['content-type'], what).toBe('application/json; charset=utf-8');
  expect(JSON.parse(r.body), what).toEqual({ error: { code: 'too_many_streams', message: `too many event streams open on this port (api.maxStreams: ${MAX}); retry after 5 s` } });
}

/** Opens until one is accepted (a closed stream's slot is freed when the gateway sees the close). */
function openOnceFreed(port: number, path: string): Promise<Opened> {
  return waitFor(`a free slot for ${path}`, 5_000, async () => {
    const r = await openStream(port, path);
    return r.status === 200 ? r : null;
  });
}

/**
 * Opens MAX streams, each once a slot is free: the previous test's streams were closed by the
 * client, and the gateway frees their slots when it sees the close.
 */
async function openAll(port: number, path: string): Promise<Opened[]> {
  const all: Opened[] = [];
  for (let i = 0; i < MAX; i++) all.push(await openOnceFreed(port, path));
  return all;
}

describe('api.maxStreams: event streams per port', () => {
  it('public port: the lobby streams past the limit get 503 in the API error shape; a closed stream frees its slot', async () => {
    const lobby = await openAll(gw.port, LOBBY);
    expect(lobby[0]!.headers['content-type']).toMatch(/^text\/event-stream/);

    expectFull(await openStream(gw.port, LOBBY), 'lobby stream 4');
    // The public status stream shares the public port's slots.
    expectFull(await openStream(gw.port, STATUS), 'public status stream');
    // Reads and pages are not streams: they still answer.
    const lobbyJson = await fetch(`${gw.url}/_roomgate/api/lobby`, { signal: AbortSignal.timeout(5_000) });
    expect(lobbyJson.status).toBe(200);

    await lobby[0]!.close();
    const again = await openOnceFreed(gw.port, LOBBY);
    expect(again.status).toBe(200);
    // Exactly one slot was freed.
    expectFull(await openStream(gw.port, LOBBY), 'lobby stream after one was reopened');
  });

  it('public port: status streams count too, and a lobby stream waits for them', async () => {
    const status = await openAll(gw.port, STATUS);
    expectFull(await openStream(gw.port, LOBBY), 'lobby stream with the status streams open');
    await status[1]!.close();
    expect((await openOnceFreed(gw.port, LOBBY)).status).toBe(200);
  });

  it('admin port: its own slots, the same limit and the same answer; the public port being full does not take them', async () => {
    await openAll(gw.port, LOBBY);
    expectFull(await openStream(gw.port, STATUS), 'public status stream with the public port full');
    const admin = await openAll(gw.adminPort, STATUS);
    expectFull(await openStream(gw.adminPort, STATUS), 'admin status stream 4');

    await admin[2]!.close();
    expect((await openOnceFreed(gw.adminPort, STATUS)).status).toBe(200);
    expectFull(await openStream(gw.adminPort, STATUS), 'admin status stream after one was reopened');
  });
});
