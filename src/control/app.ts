// The setup every control-plane fastify app shares (the admin port's and the public port's): zod
// schemas validate with roomgate's own messages, every error leaves in the one error shape (JSON)
// or, on page routes, as plain text, unknown paths and methods answer 404/405 as the routes say,
// and request bodies are read by one reader with a cap and a deadline. No app listens by itself:
// a node:http server hands it requests (handOff), so fastify never sees proxied traffic or an
// upgrade, and an open event stream (hijacked) is closed by our stop path, never awaited.
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyError, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { safeParse, type $ZodIssue, type $ZodType } from 'zod/v4/core';
import { Errors, HttpError, errorMessage, type HeaderMap } from '../http/errors.js';
import { JSON_HEADERS, jsonText, plainResponse, textResponse } from '../http/replies.js';
import type { Logger } from '../observability/logger.js';

declare module 'fastify' {
  // Every control-plane route's config is a RouteConfig.
  interface FastifyContextConfig extends RouteConfig {}
}

/** What a route may say about itself (fastify route `config`). */
export interface RouteConfig {
  /**
   * api: JSON errors, 405 with Allow for a known path with another method (OPTIONS: 204);
   * page: plain-text errors, 405 read-only; admin: JSON errors, 404 for any other method.
   */
  readonly kind?: 'api' | 'page' | 'admin';
  /** Checked before anything else of the request (and before its body is read). */
  readonly authorize?: (req: FastifyRequest) => HttpError | null;
  /** Checks that need the path's parameters, after authorize and before the body (unknown backend: 404). */
  readonly precheck?: (req: FastifyRequest) => HttpError | null;
  /** The route reads a body: at most cap bytes, within timeoutMs, parsed by parse (which throws HttpErrors). */
  readonly body?: BodyRule;
}

export interface BodyRule {
  readonly cap: number;
  /** Names the body in messages ("room metadata over 512 bytes"). */
  readonly what: string;
  readonly timeoutMs: number;
  /** 'close': refuse at once and close the connection; 'drain': read the rest, then refuse (a small trusted port). */
  readonly excess: 'close' | 'drain';
  /** Text to value; '' when the request has no body at all. */
  readonly parse: (text: string) => unknown;
}

export interface ControlAppOptions {
  readonly logger: Logger;
  /** JSON indented with a final newline (the admin port, read in terminals). */
  readonly prettyJson: boolean;
  /** The 404 for a path no route knows. */
  readonly notFound: (req: FastifyRequest) => HttpError;
  /** 500s: their message is err.message (the operator's admin port) or 'internal error'. */
  readonly exposeInternalErrors: boolean;
  /** Logged with each 500 that is not exposed. */
  readonly internalErrorLog: string;
  /** The route label of a 500 log line (never a room key or member). */
  readonly routeLabel?: (req: FastifyRequest) => string;
  /** Answered before any route, 404 and URL error included (the admin port's Host check and health). */
  readonly front?: (req: IncomingMessage) => FrontAnswer | null;
}

export type FrontAnswer = { readonly error: HttpError } | { readonly text: { readonly status: number; readonly body: string; readonly headers?: HeaderMap } };

export type ControlApp = FastifyInstance<Server, IncomingMessage, ServerResponse, FastifyBaseLogger, ZodTypeProvider>;

/** Route patterns and methods, for the 405 of a known path and for the OpenAPI completeness test. */
export interface RouteEntry {
  readonly url: string;
  readonly methods: string[];
  readonly kind: RouteConfig['kind'];
  readonly segments: readonly string[];
  /** Each method's declaration (zod schemas and config), as registered. */
  readonly byMethod: Map<string, { readonly schema: unknown; readonly config: RouteConfig }>;
}

const READ_ONLY = 'read-only: GET or HEAD\n';

export function createControlApp(o: ControlAppOptions): { app: ControlApp; routes: RouteEntry[] } {
  const app = Fastify({
    loggerInstance: o.logger,
    logController: new LogController({ disableRequestLogging: true }),
    // A room key may be 1024 characters, percent-encoded up to three times that.
    routerOptions: { maxParamLength: 16_384 },
    return503OnClosing: false,
    frameworkErrors: (err, req, reply) => {
      const front = o.front?.(req.raw);
      if (front) return answerFront(reply, front, o.prettyJson);
      const e = err.code === 'FST_ERR_BAD_URL' ? Errors.badRequest('malformed percent-encoding in the path') : Errors.badRequest(err.message);
      sendHttpError(reply, e, o.prettyJson, false);
    },
  }).withTypeProvider<ZodTypeProvider>() as unknown as ControlApp;

  const routes: RouteEntry[] = [];
  app.addHook('onRoute', (r) => {
    const methods = Array.isArray(r.method) ? r.method : [r.method];
    const kind = (r.config as RouteConfig | undefined)?.kind;
    let entry = routes.find((x) => x.url === r.url);
    if (!entry) routes.push((entry = { url: r.url, methods: [], kind, segments: r.url.split('/'), byMethod: new Map() }));
    for (const m of methods) {
      if (!entry.methods.includes(m)) entry.methods.push(m);
      entry.byMethod.set(m, { schema: r.schema, config: (r.config ?? {}) as RouteConfig });
    }
  });

  app.setValidatorCompiler(({ schema }) => (data) => {
    const r = safeParse(schema as $ZodType, data);
    return r.success ? { value: r.data } : { error: Errors.badRequest(issueMessage(r.error.issues, data)) };
  });
  // Response schemas describe (OpenAPI; the tests hold answers to them); answers are plain JSON.
  app.setSerializerCompiler(() => (data) => jsonText(data, o.prettyJson));
  app.setReplySerializer((payload) => jsonText(payload, o.prettyJson));

  // One reader for every body: the parsers fastify brings are not used.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', (req, payload, done) => {
    const rule = configOf(req).body;
    // A route that reads no body leaves it to Node (drained after the answer, as before).
    if (!rule) return done(null, undefined);
    readBody(payload, rule).then(
      (text) => {
        try {
          done(null, rule.parse(text));
        } catch (err) {
          done(err as Error, undefined);
        }
      },
      (err: HttpError) => done(err as unknown as FastifyError, undefined),
    );
  });

  app.addHook('onRequest', (req, reply, done) => {
    const front = o.front?.(req.raw);
    if (front) return answerFront(reply, front, o.prettyJson);
    const c = configOf(req);
    const refusal = c.authorize?.(req) ?? earlyValidation(req) ?? c.precheck?.(req) ?? null;
    if (refusal) return done(refusal as unknown as FastifyError);
    done();
  });
  // Nothing roomgate answers itself is cached or sniffed (routes that return an object set no headers).
  app.addHook('onSend', (_req, reply, payload, done) => {
    if (!reply.hasHeader('cache-control')) reply.header('Cache-Control', 'no-store');
    if (!reply.hasHeader('x-content-type-options')) reply.header('X-Content-Type-Options', 'nosniff');
    done(null, payload);
  });
  // A body route with no body at all: parsed as '' (the API says "empty body", the admin takes {}).
  app.addHook('preValidation', (req, _reply, done) => {
    const rule = configOf(req).body;
    if (rule && req.body === undefined) {
      try {
        req.body = rule.parse('');
      } catch (err) {
        return done(err as FastifyError);
      }
    }
    done();
  });

  app.setNotFoundHandler((req, reply) => {
    const path = pathOf(req.url);
    const known = routes.filter((r) => r.kind !== 'admin' && matches(r.segments, path));
    if (known.length === 0) return sendHttpError(reply, o.notFound(req), o.prettyJson, false);
    const methods = known.flatMap((r) => r.methods.filter((m) => m !== 'HEAD'));
    const allow = [...new Set(methods.flatMap((m) => (m === 'GET' ? ['GET', 'HEAD'] : [m])))].join(', ');
    if (known.some((r) => r.kind === 'page')) return sendText(reply, 405, READ_ONLY, { Allow: 'GET, HEAD' });
    if (req.method === 'OPTIONS') return reply.code(204).headers({ Allow: allow, 'Cache-Control': 'no-store' }).send();
    sendHttpError(reply, Errors.methodNotAllowed(`${req.method} is not allowed on ${clip(path)}; allowed: ${allow}`, { headers: { Allow: allow } }), o.prettyJson, false);
  });

  app.setErrorHandler((err: unknown, req, reply) => {
    const text = configOf(req).kind === 'page';
    if (err instanceof HttpError) return sendHttpError(reply, err, o.prettyJson, text);
    if (o.exposeInternalErrors) return sendHttpError(reply, Errors.internal(errorMessage(err)), o.prettyJson, text);
    o.logger.error({ err: errorMessage(err), method: req.method, route: o.routeLabel?.(req) ?? '?' }, o.internalErrorLog);
    sendHttpError(reply, Errors.internal(), o.prettyJson, text);
  });
  return { app, routes };
}

function configOf(req: FastifyRequest | { routeOptions?: { config?: unknown } }): RouteConfig {
  return ((req as FastifyRequest).routeOptions?.config ?? {}) as RouteConfig;
}

/** Path parameters and query checked before the body is read (as routes did before: key, query, then body). */
function earlyValidation(req: FastifyRequest): HttpError | null {
  if (!configOf(req).body) return null;
  const schema = req.routeOptions.schema as { params?: $ZodType; querystring?: $ZodType } | undefined;
  for (const [s, data] of [
    [schema?.params, req.params],
    [schema?.querystring, req.query],
  ] as const) {
    if (!s) continue;
    const r = safeParse(s, data);
    if (!r.success) return Errors.badRequest(issueMessage(r.error.issues, data));
  }
  return null;
}

/**
 * The message of the first problem, as the routes have always said it: unknown fields first; in
 * a union, the branch the input chose (`{"scores": ...}` or one score); "{where}" in a message is
 * the entry it concerns ("body", "scores[3]").
 */
export function issueMessage(issues: readonly $ZodIssue[], input: unknown): string {
  const first = [...issues].sort((a, b) => Number(b.code === 'unrecognized_keys') - Number(a.code === 'unrecognized_keys'))[0];
  if (!first) return 'invalid request';
  if (first.code === 'invalid_union' && input !== null && typeof input === 'object' && !Array.isArray(input) && first.errors.length > 1) {
    const branch = Object.hasOwn(input, 'scores') ? first.errors[0] : first.errors[first.errors.length - 1];
    if (branch && branch.length > 0) return issueMessage(branch, input);
  }
  return first.message.replace('{where}', whereOf(first.path));
}

function whereOf(path: readonly PropertyKey[]): string {
  let last = -1;
  path.forEach((p, i) => {
    if (typeof p === 'number') last = i;
  });
  if (last < 1) return 'body';
  return `${String(path[last - 1])}[${String(path[last])}]`;
}

/**
 * Reads a request body of at most rule.cap bytes as UTF-8. Beyond (declared or streamed): 413,
 * with the connection closed ('close') or after reading the rest ('drain'). A body that does not
 * arrive within rule.timeoutMs: 408, connection closed.
 */
function readBody(payload: IncomingMessage, rule: BodyRule): Promise<string> {
  const tooLarge = (): HttpError => Errors.payloadTooLarge(`${rule.what} over ${rule.cap} bytes`, rule.excess === 'close' ? { headers: { Connection: 'close' } } : {});
  const declared = payload.headers['content-length'];
  if (rule.excess === 'close' && declared !== undefined && Number(declared) > rule.cap) return Promise.reject(tooLarge());
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const done = (): void => {
      clearTimeout(timer);
      payload.off('data', onData);
      payload.off('end', onEnd);
      payload.off('error', onError);
      payload.off('close', onClose);
    };
    const abort = (e: HttpError): void => {
      done();
      payload.pause();
      reject(e);
    };
    const onData = (c: Buffer): void => {
      size += c.length;
      if (size <= rule.cap) chunks.push(c);
      else if (rule.excess === 'close') abort(tooLarge());
    };
    const onEnd = (): void => {
      done();
      if (size > rule.cap) return reject(tooLarge());
      try {
        resolve(new TextDecoder('utf-8', { fatal: true, ignoreBOM: false }).decode(Buffer.concat(chunks)));
      } catch {
        reject(Errors.badRequest('body is not valid UTF-8'));
      }
    };
    const onError = (err: Error): void => {
      done();
      reject(Errors.badRequest(`request body failed: ${err.message}`));
    };
    const onClose = (): void => {
      if (!payload.complete) onError(new Error('client went away'));
    };
    const timer = setTimeout(() => abort(Errors.bodyTimeout(`${rule.what} not received within ${rule.timeoutMs} ms`)), rule.timeoutMs);
    timer.unref();
    payload.on('data', onData);
    payload.on('end', onEnd);
    payload.on('error', onError);
    payload.on('close', onClose);
  });
}

/** An HttpError as JSON in the one shape, or as plain text on a page. */
export function sendHttpError(reply: FastifyReply, err: HttpError, pretty: boolean, text: boolean): void {
  if (reply.sent || reply.raw.headersSent) {
    // A stream that already started: nothing to say any more.
    reply.raw.destroy();
    return;
  }
  let headers = err.headers;
  if (headers['Connection'] === 'close') {
    // An h2 stream has no connection of its own to close (and h2 forbids the header).
    if (reply.request.raw.httpVersionMajor === 2) headers = Object.fromEntries(Object.entries(headers).filter(([k]) => k !== 'Connection'));
    else reply.raw.shouldKeepAlive = false;
  }
  if (text) return sendText(reply, err.status, `${err.message}\n`, headers);
  reply
    .code(err.status)
    .headers({ ...JSON_HEADERS, ...headers })
    .send(jsonText(err.body(), pretty));
}

/** A short plain-text answer with the hardening headers. */
export function sendText(reply: FastifyReply, status: number, text: string, extra: HeaderMap = {}): void {
  const r = textResponse(status, text, extra);
  reply.code(status).headers(r.headers).send(r.body);
}

function answerFront(reply: FastifyReply, a: FrontAnswer, pretty: boolean): void {
  if ('error' in a) return sendHttpError(reply, a.error, pretty, false);
  const r = plainResponse(a.text.status, a.text.body, { 'Content-Type': 'text/plain', ...a.text.headers });
  reply.code(a.text.status).headers(r.headers).send(r.body);
}

function matches(pattern: readonly string[], path: string): boolean {
  const segs = path.split('/');
  if (segs.length !== pattern.length) return false;
  return pattern.every((p, i) => p.startsWith(':') || p === segs[i]);
}

export function pathOf(url: string): string {
  const q = url.indexOf('?');
  return q < 0 ? url : url.slice(0, q);
}

export function clip(s: string): string {
  return s.length > 64 ? `${s.slice(0, 64)}...` : s;
}
