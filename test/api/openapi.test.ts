// The OpenAPI document of the public API is generated from the routes (@fastify/swagger and the
// routes' zod schemas); these tests keep it complete. The routes are enumerated from fastify itself
// (every route registered under /_roomgate/api/), never from a hand-made list: each must appear
// with its methods, path and query parameters, request body, and every status it can answer, both
// as its declaration implies (parameters: 400, token: 401/403, body: 408/413, ...) and as it really
// answers to a set of probe requests (good and bad input, no or wrong token, oversized bodies, the
// store down). The JSON answers of the probes must match their documented schemas. No port: inject().
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { z } from 'zod';
import { API_PREFIX } from '../../src/control/api-routes.js';
import { API_ERROR_CODES } from '../../src/control/api-schemas.js';
import { Errors } from '../../src/http/errors.js';
import type { ControlPlane } from '../../src/control/control-plane.js';
import { MemorySharedDataStore } from '../../src/shared-data/memory-store.js';
import type { SharedDataStore } from '../../src/shared-data/store.js';
import { makeControl } from '../support/control.js';

const TOKEN = 'openapi-token-0123456789abcdef';

/** The memory store, with a switch that makes it report itself down (every API call then 503s). */
const switchable = { down: false };
function switchableStore(inner: MemorySharedDataStore): SharedDataStore {
  return new Proxy(inner, {
    get(target, prop) {
      if (prop === 'available') return !switchable.down && target.available;
      const v = Reflect.get(target, prop, target) as unknown;
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
}

let store: SharedDataStore;
let control: ControlPlane;
let doc: Record<string, any>;

interface ApiRoute {
  readonly url: string;
  readonly method: string;
  /** The route's own declaration, as fastify holds it. */
  readonly schema: { params?: z.ZodObject; querystring?: z.ZodObject; body?: z.ZodType; response?: Record<string, any> };
  readonly config: { authorize?: unknown; body?: unknown };
}

/** Every route fastify has under /_roomgate/api/, each method once (HEAD is GET's twin). */
function apiRoutes(): ApiRoute[] {
  const out: ApiRoute[] = [];
  for (const r of control.publicRoutes) {
    if (!r.url.startsWith(`${API_PREFIX}/`)) continue;
    for (const method of r.methods) {
      if (method === 'HEAD') continue;
      expect(control.publicApp.hasRoute({ method: method as 'GET', url: r.url }), `${method} ${r.url}`).toBe(true);
      const declared = r.byMethod.get(method);
      out.push({ url: r.url, method, schema: (declared?.schema ?? {}) as ApiRoute['schema'], config: (declared?.config ?? {}) as ApiRoute['config'] });
    }
  }
  return out;
}

const docPath = (url: string): string => url.slice(API_PREFIX.length).replace(/:(\w+)/g, '{$1}');
const opOf = (r: ApiRoute): Record<string, any> => doc.paths[docPath(r.url)]?.[r.method.toLowerCase()];
const SAMPLE: Record<string, string> = { room: 'r1', board: 'b1', member: 'm1' };
const concrete = (url: string, bad?: string): string => url.replace(/:(\w+)/g, (_, name: string) => (name === bad ? 'bad%20value%00' : (SAMPLE[name] ?? 'x')));

beforeAll(async () => {
  store = switchableStore(new MemorySharedDataStore('gw-openapi', { presenceTtlMs: 60_000 }));
  ({ control } = makeControl(store, { api: { tokens: [TOKEN], maxMetaBytes: 512 } }));
  await control.ready();
  await store.publishPresence([{ room: 'r1', backend: 'b1', sockets: 2, since: Date.now() }], 60_000);
  await store.score('b1', 'm1', 5, 'set');
  const res = await control.publicApp.inject({ method: 'GET', url: `${API_PREFIX}/openapi.json` });
  expect(res.statusCode).toBe(200);
  expect(res.headers['content-type']).toBe('application/json; charset=utf-8');
  doc = res.json();
});

afterAll(async () => {
  await control.close();
});

describe('the OpenAPI document, generated from the routes', () => {
  it('is OpenAPI 3.1 with the API as its server, and the routes fastify has are exactly the documented ones', () => {
    expect(doc.openapi).toBe('3.1.0');
    expect(doc.servers).toEqual([{ url: '/_roomgate/api' }]);
    const routes = apiRoutes();
    expect(routes.length).toBeGreaterThanOrEqual(10);
    const fromRoutes = routes.map((r) => `${r.method.toLowerCase()} ${docPath(r.url)}`).sort();
    const documented = Object.entries(doc.paths as Record<string, Record<string, unknown>>)
      .flatMap(([path, item]) => Object.keys(item).map((m) => `${m} ${path}`))
      .sort();
    expect(documented).toEqual(fromRoutes);
    // No page route leaks into it.
    expect(Object.keys(doc.paths).some((p) => p.includes('lobby/new') || p.startsWith('/_roomgate'))).toBe(false);
  });

  it('each route: operationId, a 2xx answer, its path and query parameters and its request body', () => {
    for (const r of apiRoutes()) {
      const what = `${r.method} ${r.url}`;
      const op = opOf(r);
      expect(op, what).toBeDefined();
      expect(op.operationId, what).toEqual(expect.any(String));
      expect(Object.keys(op.responses).some((s) => s.startsWith('2')), what).toBe(true);
      const params = (op.parameters ?? []) as { name: string; in: string; required?: boolean }[];
      for (const name of [...r.url.matchAll(/:(\w+)/g)].map((m) => m[1] as string)) {
        expect(params, what).toContainEqual(expect.objectContaining({ name, in: 'path', required: true }));
      }
      for (const name of Object.keys(r.schema.querystring?.shape ?? {})) {
        expect(params, what).toContainEqual(expect.objectContaining({ name, in: 'query' }));
      }
      if (r.schema.body) {
        expect(op.requestBody?.required, what).toBe(true);
        expect(op.requestBody.content['application/json'].schema, what).toBeDefined();
      } else expect(op.requestBody, what).toBeUndefined();
      if (r.config.authorize) expect(op.security, what).toEqual([{ bearer: [] }, { basic: [] }]);
    }
  });

  it('each route documents every status its declaration implies', () => {
    for (const r of apiRoutes()) {
      const what = `${r.method} ${r.url}`;
      const statuses = Object.keys(opOf(r).responses);
      const implied = ['405', '500'];
      if (r.schema.params || r.schema.querystring || r.schema.body) implied.push('400');
      if (r.config.authorize) implied.push('401', '403');
      if (r.config.body) implied.push('408', '413');
      expect(statuses, what).toEqual(expect.arrayContaining(implied));
      for (const s of statuses.filter((x) => !x.startsWith('2'))) {
        expect(opOf(r).responses[s].content['application/json'].schema, `${what} ${s}`).toEqual({ $ref: '#/components/schemas/Error' });
      }
    }
  });

  it('each route documents every status it answers to probes, and its JSON answers match their documented schemas', async () => {
    const inject = (method: string, url: string, o: { token?: string | null; body?: string; headers?: Record<string, string> } = {}) =>
      control.publicApp.inject({
        method: method as 'GET',
        url,
        headers: { ...(o.token ? { authorization: `Bearer ${o.token}` } : {}), ...(o.body === undefined ? {} : { 'content-type': 'application/json' }), ...o.headers },
        ...(o.body === undefined ? {} : { payload: o.body }),
      });
    let checked = 0;
    for (const r of apiRoutes()) {
      if (r.url.endsWith('/lobby/stream')) continue; // a stream: its probes are in public-api.test.ts; HEAD and errors below
      const what = `${r.method} ${r.url}`;
      const url = concrete(r.url);
      const hasBody = Boolean(r.schema.body);
      const good = r.url.endsWith('/scores') ? '{"member": "m1", "score": 7}' : '{"title": "t"}';
      const probes: { method: string; url: string; token?: string | null; body?: string }[] = [
        { method: r.method, url, token: TOKEN, ...(hasBody ? { body: good } : {}) },
        { method: r.method, url, token: null, ...(hasBody ? { body: good } : {}) },
        { method: r.method, url, token: 'wrong-token-0123456789abcdef', ...(hasBody ? { body: good } : {}) },
        { method: r.method, url: concrete(r.url).replace('r1', 'nope').replace('b1', 'nope').replace('m1', 'nope'), token: TOKEN, ...(hasBody ? { body: good } : {}) },
        ...[...r.url.matchAll(/:(\w+)/g)].map((m) => ({ method: r.method, url: concrete(r.url, m[1]), token: TOKEN, ...(hasBody ? { body: good } : {}) })),
        ...Object.keys(r.schema.querystring?.shape ?? {}).map((q) => ({ method: r.method, url: `${url}?${q}=1&${q}=2`, token: TOKEN, ...(hasBody ? { body: good } : {}) })),
        ...(hasBody
          ? [
              { method: r.method, url, token: TOKEN, body: 'not json' },
              { method: r.method, url, token: TOKEN, body: '[1]' },
              { method: r.method, url, token: TOKEN, body: `{"pad": "${'x'.repeat(70_000)}"}` },
            ]
          : []),
        ...['GET', 'PUT', 'POST', 'DELETE', 'PATCH'].filter((m) => m !== r.method && !(m === 'GET' && r.method === 'HEAD')).map((m) => ({ method: m, url, token: TOKEN })),
      ];
      for (const down of [false, true]) {
        switchable.down = down;
        for (const p of down ? probes.slice(0, 1) : probes) {
          const res = await inject(p.method, p.url, p);
          // Another method on the same path is another route (or the 405): it is its own probe's business.
          const own = p.method === r.method || res.statusCode === 405;
          if (!own) continue;
          const status = String(res.statusCode);
          const documented = opOf(r).responses[status];
          expect(documented, `${what}: ${p.method} ${p.url.slice(0, 80)} answered ${status} ${res.body.slice(0, 120)}`).toBeDefined();
          const schema = r.schema.response?.[status]?.content?.['application/json']?.schema as z.ZodType | undefined;
          if (schema && res.body !== '') {
            const json = res.json();
            // Parsing keeps what the schema knows: an undocumented field would be missing.
            expect(schema.parse(json), `${what} ${status}`).toEqual(json);
            checked++;
          }
        }
      }
      switchable.down = false;
    }
    expect(checked).toBeGreaterThan(40);
  });

  it('the event stream route: HEAD, 400 and 503 are documented, and its 200 is an event stream', async () => {
    const op = doc.paths['/lobby/stream'].get;
    expect(Object.keys(op.responses['200'].content)).toEqual(['text/event-stream']);
    expect(Object.keys(op.responses)).toEqual(expect.arrayContaining(['400', '503']));
    const head = await control.publicApp.inject({ method: 'HEAD', url: `${API_PREFIX}/lobby/stream` });
    expect(head.statusCode).toBe(200);
    expect(head.headers['content-type']).toBe('text/event-stream; charset=utf-8');
    expect((await control.publicApp.inject({ method: 'GET', url: `${API_PREFIX}/lobby/stream?limit=0` })).statusCode).toBe(400);
  });

  it('components: the one error shape with the API codes, security schemes, and every $ref resolves', () => {
    const refs: string[] = [];
    const walk = (v: unknown): void => {
      if (Array.isArray(v)) v.forEach(walk);
      else if (v && typeof v === 'object') {
        for (const [k, x] of Object.entries(v)) {
          if (k === '$ref' && typeof x === 'string') refs.push(x);
          else walk(x);
        }
      }
    };
    walk(doc);
    expect(refs.length).toBeGreaterThan(20);
    for (const r of refs) {
      expect(r.startsWith('#/')).toBe(true);
      let node: unknown = doc;
      for (const part of r.slice(2).split('/')) node = (node as Record<string, unknown> | undefined)?.[part];
      expect(node, r).toBeDefined();
    }
    // The codes the API answers, each one of the catalogue's (src/http/errors.ts).
    const catalogue = new Set(Object.values(Errors).map((e) => e.code));
    expect(doc.components.schemas.Error.properties.error.properties.code.enum).toEqual([...API_ERROR_CODES]);
    for (const code of API_ERROR_CODES) expect(catalogue.has(code), code).toBe(true);
    expect(API_ERROR_CODES).toContain('store_unavailable');
    expect(doc.components.securitySchemes.bearer).toMatchObject({ type: 'http', scheme: 'bearer' });
    expect(doc.components.securitySchemes.basic).toMatchObject({ type: 'http', scheme: 'basic' });
    // Query parameters carry their limits as integers, not as the strings they arrive as.
    const limit = (doc.paths['/lobby'].get.parameters as { name: string; schema: unknown }[]).find((p) => p.name === 'limit');
    expect(limit?.schema).toEqual({ type: 'integer', minimum: 1, maximum: 500, default: 50 });
  });
});
