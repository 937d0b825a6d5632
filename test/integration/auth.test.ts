// One token check on every listener roomgate answers itself (src/http/auth.ts), with real
// requests to a real gateway: admin writes (admin.token), public API writes (api.tokens, two of
// them) and the status page on the public port (status.public: token, admin.token). Each gets the
// same Authorization headers: the scheme in any case, the token as Bearer or as Basic password,
// and the same refusals (a wrong token, another listener's token, an empty header, garbage).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { httpRequest, startBackends, startGateway, stopAll, type GatewayProc, type RawAnswer } from '../support/processes.js';

const ADMIN_TOKEN = 'auth-admin-token-0123456789abcdef';
const API_TOKENS = ['auth-api-token-one-0123456789ab', 'auth-api-token-two-0123456789ab'];

let gw: GatewayProc;

beforeAll(async () => {
  const backends = await startBackends(['b1']);
  // Wrong tokens are sent on purpose, all from 127.0.0.1: the per-address limit of wrong tokens
  // (429) has its own test (test/control/auth-throttle.test.ts).
  gw = await startGateway({ backends, config: { admin: { token: ADMIN_TOKEN }, api: { tokens: API_TOKENS }, status: { public: 'token' }, auth: { maxFailures: 0 } } });
});

afterAll(stopAll);

const b64 = (s: string | Buffer): string => Buffer.from(s).toString('base64');

interface Listener {
  readonly name: string;
  /** The tokens it accepts. */
  readonly tokens: readonly string[];
  /** A token it must refuse (another listener's). */
  readonly foreign: string;
  readonly ok: number;
  send(authorization: string | undefined): Promise<RawAnswer>;
  /** What its refusal looks like (401 and its own body and challenge). */
  refused(r: RawAnswer, what: string): void;
}

const withAuth = (authorization: string | undefined): Record<string, string> => (authorization === undefined ? {} : { authorization });

const LISTENERS: readonly Listener[] = [
  {
    name: 'admin port: POST /backends/b1/undrain',
    tokens: [ADMIN_TOKEN],
    foreign: API_TOKENS[0]!,
    ok: 200,
    // undrain of an active backend changes nothing, so every accepted header may repeat it.
    send: (auth) => httpRequest(gw.adminPort, '/backends/b1/undrain', { method: 'POST', headers: withAuth(auth) }),
    refused: (r, what) => {
      expect(r.status, what).toBe(401);
      expect(JSON.parse(r.body).error, what).toEqual({ code: 'unauthorized', message: expect.stringMatching(/missing or wrong bearer token: send Authorization: Bearer <admin\.token>/) });
      expect(r.headers['www-authenticate'], what).toBe('Bearer realm="roomgate admin"');
    },
  },
  {
    name: 'public API: PUT /_roomgate/api/rooms/auth-room/meta?pinned=1',
    tokens: API_TOKENS,
    foreign: ADMIN_TOKEN,
    ok: 200,
    send: (auth) =>
      httpRequest(gw.port, '/_roomgate/api/rooms/auth-room/meta?pinned=1', { method: 'PUT', headers: { ...withAuth(auth), 'content-type': 'application/json' }, body: '{"v":1}' }),
    refused: (r, what) => {
      expect(r.status, what).toBe(401);
      expect(JSON.parse(r.body).error.code, what).toBe('unauthorized');
      expect(r.headers['www-authenticate'], what).toMatch(/^Bearer realm="roomgate"/);
    },
  },
  {
    name: 'public port: the status page (status.public: token)',
    tokens: [ADMIN_TOKEN],
    foreign: API_TOKENS[0]!,
    ok: 200,
    send: (auth) => httpRequest(gw.port, '/_roomgate/', { headers: withAuth(auth) }),
    refused: (r, what) => {
      expect(r.status, what).toBe(401);
      expect(r.body, what).not.toContain('<table');
      expect(r.headers['www-authenticate'], what).toBe('Basic realm="roomgate status", charset="UTF-8"');
    },
  },
];

describe.each(LISTENERS)('$name', (l) => {
  it('accepts each of its tokens as bearer, BEARER, Bearer with extra whitespace, or Basic password with any user name', async () => {
    for (const t of l.tokens) {
      for (const auth of [`Bearer ${t}`, `bearer ${t}`, `BEARER ${t}`, `Bearer \t${t}  `, `Basic ${b64(`anyone:${t}`)}`, `basic ${b64(`:${t}`)}`]) {
        const r = await l.send(auth);
        expect(r.status, `${auth}: ${r.body}`).toBe(l.ok);
      }
    }
  });

  it('refuses a wrong token, another listener token, no or an empty header, garbage base64 and other schemes with 401', async () => {
    const t = l.tokens[0]!;
    const refused: [string, string | undefined][] = [
      ['no header', undefined],
      ['an empty header', ''],
      ['a wrong token', 'Bearer wrong-token-0123456789abcdef'],
      ['a wrong Basic password', `Basic ${b64('anyone:wrong-token-0123456789abcdef')}`],
      ['the token with one character off', `Bearer ${t.slice(0, -1)}X`],
      ['another listener token', `Bearer ${l.foreign}`],
      ['another listener token as Basic password', `Basic ${b64(`u:${l.foreign}`)}`],
      ['Bearer without a token', 'Bearer '],
      ['garbage base64', 'Basic !!!not-base64!!!'],
      ['base64 of bytes that are not UTF-8', `Basic ${b64(Buffer.from([0x75, 0x3a, 0xff, 0xfe]))}`],
      ['Basic with the token but no colon', `Basic ${b64(t)}`],
      ['Basic with the token as user name', `Basic ${b64(`${t}:`)}`],
      ['the token without a scheme', t],
      ['another scheme', `Digest ${t}`],
    ];
    for (const [what, auth] of refused) l.refused(await l.send(auth), what);
  });
});

describe('the writes that passed did what they say, and no more', () => {
  it('b1 is still active and the room has the metadata', async () => {
    const b = JSON.parse((await httpRequest(gw.adminPort, '/backends/b1')).body) as { state: string; admin: unknown };
    expect(b).toMatchObject({ state: 'up', admin: null });
    const meta = await httpRequest(gw.port, '/_roomgate/api/rooms/auth-room');
    expect(meta.status).toBe(200);
    expect(JSON.parse(meta.body)).toMatchObject({ room: 'auth-room', meta: { v: 1 }, pinned: true });
  });
});
