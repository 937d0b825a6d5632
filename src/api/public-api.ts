// The public data API under /_roomgate/api/ on the public port: who is online, the lobby (also
// as Server-Sent Events), one room, room metadata (token), leaderboards (scores: token). Plain
// node:http, JSON in and out, one error shape:
//   {"error": {"code": "bad_request" | ..., "message": "..."}}
// Nothing here touches routing: when the shared store fails, these routes answer 503 and the
// gateway keeps proxying. Room keys go through the gateway's validator before any store call.
// The routes, parameters and bodies are described in ./openapi.ts (GET .../openapi.json).
import type { IncomingMessage, ServerResponse } from 'node:http';
import { TokenCheck } from '../http/auth.js';
import { streamsFullError, type StreamSlots } from '../http/stream-slots.js';
import type { Logger } from '../observability/logger.js';
import type { LobbyQuery, Ranked, RoomMeta, ScoreMode, SharedDataStore } from '../shared-data/store.js';
import { LobbyStream, STORE_UNAVAILABLE_MESSAGE } from './lobby-stream.js';
import { OPENAPI_DOCUMENT } from './openapi.js';

export const API_PREFIX = '/_roomgate/api';

export interface PublicApiOptions {
  store: SharedDataStore;
  /** Tokens allowed to write (metadata, scores), as Bearer or Basic password (src/http/auth.ts). Empty list: writes refused (403, `api.tokens`). */
  tokens: readonly string[];
  /** The gateway's room key validator. */
  validateRoom: (room: string) => boolean;
  /** Largest metadata body (bytes of JSON); 413 beyond. */
  maxMetaBytes: number;
  /** SSE: changes are pushed at most this often. */
  streamIntervalMs: number;
  /** The public port's event stream slots (api.maxStreams, shared with the public status stream). */
  streamSlots: StreamSlots;
  logger: Logger;
  /** SSE `: ping` comment period (default 15 s; tests shorten it). */
  streamPingMs?: number;
  /** A request body must arrive within this (default 10 s; 408 otherwise). */
  bodyTimeoutMs?: number;
}

export type ErrorCode =
  | 'bad_request'
  | 'unauthorized'
  | 'forbidden'
  | 'not_found'
  | 'payload_too_large'
  | 'method_not_allowed'
  | 'store_unavailable'
  | 'too_many_streams'
  | 'internal';

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: ErrorCode,
    message: string,
    readonly headers: Readonly<Record<string, string>> = {},
  ) {
    super(message);
  }
}

/** A store call rejected (or the store says it is down): 503, never 500. */
class StoreError extends Error {}

export const LIMITS = {
  lobbyDefaultLimit: 50,
  lobbyMaxLimit: 500,
  boardDefaultLimit: 50,
  boardMaxLimit: 500,
  maxOffset: 1_000_000_000,
  maxAround: 100,
  maxMinSockets: 1_000_000_000,
  maxFilterChars: 1024,
  maxMemberChars: 128,
  maxBatch: 1000,
  maxScoreBodyBytes: 64 * 1024,
  maxScoreMagnitude: Number.MAX_SAFE_INTEGER,
  bodyTimeoutMs: 10_000,
  retryAfterS: 2,
} as const;

export const BOARD_PATTERN = /^[A-Za-z0-9_.:-]{1,64}$/;
// Printable: no control characters (C0, DEL, C1) and no lone surrogates.
const MEMBER_FORBIDDEN = /[\p{Cc}\p{Cs}]/u;
const SCORE_MODES: readonly ScoreMode[] = ['set', 'incr', 'max'];
const LOBBY_SORTS = ['sockets', 'since', 'room'] as const;

type Method = 'GET' | 'PUT' | 'DELETE' | 'POST';
type Params = readonly string[];
type Handler = (ctx: Ctx, params: Params) => Promise<Reply | null>;

interface Route {
  /** Path segments after /_roomgate/api/; '*' is a parameter. */
  readonly pattern: readonly string[];
  readonly methods: Partial<Record<Method, Handler>>;
}

interface Ctx {
  readonly req: IncomingMessage;
  readonly res: ServerResponse;
  readonly query: URLSearchParams;
}

interface Reply {
  readonly status: number;
  readonly body?: unknown;
  /** Already serialized body (the OpenAPI document). */
  readonly raw?: string;
}

const BATCH_CONCURRENCY = 50;

/** Runs fn over items, at most `size` at a time, keeping the order of results. */
async function inGroups<T, R>(items: readonly T[], size: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const out: R[] = [];
  for (let i = 0; i < items.length; i += size) out.push(...(await Promise.all(items.slice(i, i + size).map(fn))));
  return out;
}

export class PublicApi {
  private readonly tokens: TokenCheck;
  private readonly stream: LobbyStream;
  private readonly routes: readonly Route[];
  private readonly openapiJson: string;
  private readonly bodyTimeoutMs: number;
  private storeFailures = 0;
  private lastStoreLog = 0;

  constructor(private readonly o: PublicApiOptions) {
    this.tokens = new TokenCheck(o.tokens);
    this.stream = new LobbyStream({
      store: o.store,
      intervalMs: o.streamIntervalMs,
      pingMs: o.streamPingMs ?? 15_000,
      retryMs: 2_000,
      resyncThreshold: 200,
      maxBufferedBytes: 1 << 20,
      logger: o.logger,
    });
    this.openapiJson = JSON.stringify(OPENAPI_DOCUMENT);
    this.bodyTimeoutMs = o.bodyTimeoutMs ?? LIMITS.bodyTimeoutMs;
    this.routes = [
      { pattern: ['online'], methods: { GET: () => this.online() } },
      { pattern: ['lobby'], methods: { GET: (c) => this.lobby(c) } },
      { pattern: ['lobby', 'stream'], methods: { GET: (c) => this.lobbyStream(c) } },
      { pattern: ['rooms', '*'], methods: { GET: (c, p) => this.getRoom(p) } },
      { pattern: ['rooms', '*', 'meta'], methods: { PUT: (c, p) => this.putMeta(c, p), DELETE: (c, p) => this.deleteMeta(c, p) } },
      { pattern: ['leaderboards', '*'], methods: { GET: (c, p) => this.board(c, p) } },
      { pattern: ['leaderboards', '*', 'members', '*'], methods: { GET: (c, p) => this.boardMember(c, p) } },
      { pattern: ['leaderboards', '*', 'scores'], methods: { POST: (c, p) => this.postScores(c, p) } },
      { pattern: ['openapi.json'], methods: { GET: () => Promise.resolve({ status: 200, raw: this.openapiJson }) } },
    ];
  }

  /** Number of open lobby streams. */
  get streams(): number {
    return this.stream.size;
  }

  /** Handles a request under /_roomgate/api/ (the caller only passes those); never throws. */
  handle(req: IncomingMessage, res: ServerResponse): void {
    let p: Promise<Reply | null>;
    try {
      p = this.dispatch(req, res);
    } catch (err) {
      p = Promise.reject(err);
    }
    p.then(
      (reply) => {
        if (!reply) return;
        let text: string | undefined;
        try {
          text = reply.raw ?? (reply.body === undefined ? undefined : JSON.stringify(reply.body));
        } catch (err) {
          // e.g. a store answer that is not JSON (a BigInt): a bug, not the client's fault.
          return this.fail(req, res, err);
        }
        sendJson(res, reply.status, text);
      },
      (err: unknown) => this.fail(req, res, err),
    ).catch((err: unknown) => {
      // Only reachable if writing the response itself threw.
      this.o.logger.error({ err: errorMessage(err) }, 'public api: response failed');
      res.destroy();
    });
  }

  /** Ends every SSE stream (shutdown) and stops timers. */
  close(): void {
    this.stream.close();
  }

  private dispatch(req: IncomingMessage, res: ServerResponse): Promise<Reply | null> {
    // The raw path, not a WHATWG URL: no dot-segment resolution, so rooms "." and ".." are addressable.
    const target = req.url ?? '/';
    const qi = target.indexOf('?');
    const path = qi < 0 ? target : target.slice(0, qi);
    const query = new URLSearchParams(qi < 0 ? '' : target.slice(qi + 1));
    if (!path.startsWith(`${API_PREFIX}/`)) throw notFound(`no route ${clip(path)}: see ${API_PREFIX}/openapi.json`);
    // Split before decoding, so an encoded '/' stays inside its segment.
    const raw = path.slice(API_PREFIX.length + 1).split('/');
    let route: Route | undefined;
    let params: string[] = [];
    for (const r of this.routes) {
      if (r.pattern.length !== raw.length) continue;
      const got: string[] = [];
      let ok = true;
      for (let i = 0; i < raw.length && ok; i++) {
        const want = r.pattern[i] as string;
        const seg = raw[i] as string;
        if (want === '*') got.push(seg);
        else ok = seg === want;
      }
      if (ok) {
        route = r;
        params = got;
        break;
      }
    }
    if (!route) throw notFound(`no route ${clip(path)}: see ${API_PREFIX}/openapi.json`);
    const method = req.method ?? 'GET';
    const allowed = Object.keys(route.methods) as Method[];
    const allow = [...allowed, ...(allowed.includes('GET') ? ['HEAD'] : [])].join(', ');
    if (method === 'OPTIONS') {
      res.writeHead(204, { Allow: allow, 'Cache-Control': 'no-store' });
      res.end();
      return Promise.resolve(null);
    }
    const handler = route.methods[(method === 'HEAD' ? 'GET' : method) as Method];
    if (!handler) throw new ApiError(405, 'method_not_allowed', `${method} is not allowed on ${clip(path)}; allowed: ${allow}`, { Allow: allow });
    const decoded = params.map((s) => {
      if (s === '') throw new ApiError(400, 'bad_request', 'empty path segment');
      try {
        return decodeURIComponent(s);
      } catch {
        throw new ApiError(400, 'bad_request', 'malformed percent-encoding in the path');
      }
    });
    return handler({ req, res, query }, decoded);
  }

  private fail(req: IncomingMessage, res: ServerResponse, err: unknown): void {
    let e: ApiError;
    if (err instanceof ApiError) e = err;
    else if (err instanceof StoreError) {
      this.logStoreFailure(err);
      e = new ApiError(503, 'store_unavailable', STORE_UNAVAILABLE_MESSAGE, { 'Retry-After': String(LIMITS.retryAfterS) });
    } else {
      this.o.logger.error({ err: errorMessage(err), method: req.method, route: routeLabel(req.url) }, 'public api: internal error');
      e = new ApiError(500, 'internal', 'internal error');
    }
    if (res.headersSent) {
      // A stream that already started: nothing to say in JSON any more.
      res.destroy();
      return;
    }
    sendJson(res, e.status, JSON.stringify({ error: { code: e.code, message: e.message } }), e.headers);
  }

  /** One warn line for the first failure, then at most one per 10 s with the count. */
  private logStoreFailure(err: StoreError): void {
    this.storeFailures++;
    const now = Date.now();
    if (now - this.lastStoreLog < 10_000) return;
    this.lastStoreLog = now;
    this.o.logger.warn({ err: err.message, failures: this.storeFailures }, 'public api: shared store unavailable (503)');
    this.storeFailures = 0;
  }

  /** Runs a store call; any rejection (or a store that says it is down) becomes a 503. */
  private async call<T>(f: (s: SharedDataStore) => Promise<T>): Promise<T> {
    if (!this.o.store.available) throw new StoreError('store reports unavailable');
    try {
      return await f(this.o.store);
    } catch (err) {
      throw new StoreError(errorMessage(err));
    }
  }

  /** Throws 403 (no tokens configured) or 401 (missing or wrong token). Constant time in the token. */
  private authorize(req: IncomingMessage): void {
    if (!this.tokens.configured) {
      throw new ApiError(403, 'forbidden', 'writes through the public API are disabled: no token is configured (set api.tokens, or ROOMGATE_API_TOKENS)');
    }
    const verdict = this.tokens.verdict(req.headers.authorization);
    if (verdict === 'missing') {
      throw new ApiError(401, 'unauthorized', 'missing bearer token: send Authorization: Bearer <token>', { 'WWW-Authenticate': 'Bearer realm="roomgate"' });
    }
    if (verdict === 'wrong') {
      throw new ApiError(401, 'unauthorized', 'wrong bearer token', { 'WWW-Authenticate': 'Bearer realm="roomgate", error="invalid_token"' });
    }
  }

  private room(key: string): string {
    if (!this.o.validateRoom(key)) throw new ApiError(400, 'bad_request', 'invalid room key: it does not match room.pattern (or is over 1024 characters)');
    return key;
  }

  // ---- routes ----

  private async online(): Promise<Reply> {
    return { status: 200, body: await this.call((s) => s.online()) };
  }

  private async lobby(c: Ctx): Promise<Reply> {
    const q = parseLobbyQuery(c.query);
    return { status: 200, body: await this.call((s) => s.lobby(q)) };
  }

  private async lobbyStream(c: Ctx): Promise<null> {
    const q = parseLobbyQuery(c.query);
    if (this.stream.isClosed) throw new ApiError(503, 'store_unavailable', 'the gateway is shutting down: the lobby stream is closed', { 'Retry-After': String(LIMITS.retryAfterS) });
    if (c.req.method === 'HEAD') {
      c.res.writeHead(200, { 'Content-Type': 'text/event-stream; charset=utf-8', 'Cache-Control': 'no-store' });
      c.res.end();
      return null;
    }
    if (!this.o.streamSlots.take(c.res)) {
      const full = streamsFullError(this.o.streamSlots.max);
      throw new ApiError(503, full.code, full.message, full.headers);
    }
    this.stream.open(c.req, c.res, q);
    return null;
  }

  private async getRoom(p: Params): Promise<Reply> {
    const room = this.room(p[0] as string);
    const r = await this.call((s) => s.room(room));
    if (!r) throw notFound('no such room: it has no live sockets and no pinned metadata');
    return { status: 200, body: r };
  }

  private async putMeta(c: Ctx, p: Params): Promise<Reply> {
    this.authorize(c.req);
    const room = this.room(p[0] as string);
    const pinned = parseBool(c.query, 'pinned');
    const body = await readBody(c.req, c.res, this.o.maxMetaBytes, 'room metadata', this.bodyTimeoutMs);
    const meta = parseJson(body);
    if (meta === null || typeof meta !== 'object' || Array.isArray(meta)) {
      throw new ApiError(400, 'bad_request', 'room metadata must be a JSON object, e.g. {"status": "waiting", "title": "Room 42"}');
    }
    // Unpinned metadata of a room without live sockets is kept for one presence TTL (so it can be
    // set just before the first socket arrives); the store decides, the answer shows the result.
    await this.call((s) => s.setMeta(room, meta as RoomMeta, pinned));
    const r = (await this.call((s) => s.room(room))) ?? { room, backend: '', sockets: 0, since: new Date().toISOString(), meta, pinned };
    return { status: 200, body: r };
  }

  private async deleteMeta(c: Ctx, p: Params): Promise<Reply> {
    this.authorize(c.req);
    const room = this.room(p[0] as string);
    const existed = await this.call((s) => s.deleteMeta(room));
    if (!existed) throw notFound('the room has no metadata');
    return { status: 204 };
  }

  private async board(c: Ctx, p: Params): Promise<Reply> {
    const board = parseBoard(p[0] as string);
    const sp = c.query;
    const offset = parseInteger(sp, 'offset', 0, LIMITS.maxOffset) ?? 0;
    const limit = parseInteger(sp, 'limit', 1, LIMITS.boardMaxLimit) ?? LIMITS.boardDefaultLimit;
    if (!(await this.call((s) => s.boardExists(board)))) throw notFound(`no leaderboard "${board}" (a board exists once it has a score)`);
    const [size, entries] = await Promise.all([this.call((s) => s.boardSize(board)), this.call((s) => s.top(board, offset, limit))]);
    return { status: 200, body: { board, size, entries, nextOffset: offset + entries.length < size && entries.length > 0 ? offset + entries.length : null } };
  }

  private async boardMember(c: Ctx, p: Params): Promise<Reply> {
    const board = parseBoard(p[0] as string);
    const member = parseMember(p[1] as string, 'member');
    const around = parseInteger(c.query, 'around', 0, LIMITS.maxAround);
    if (!(await this.call((s) => s.boardExists(board)))) throw notFound(`no leaderboard "${board}" (a board exists once it has a score)`);
    if (around === undefined) {
      const r = await this.call((s) => s.member(board, member));
      if (!r) throw notFound(`"${clip(member)}" has no score on leaderboard "${board}"`);
      return { status: 200, body: r };
    }
    const entries = await this.call((s) => s.around(board, member, around));
    if (!entries.some((e) => e.member === member)) throw notFound(`"${clip(member)}" has no score on leaderboard "${board}"`);
    return { status: 200, body: { board, member, entries } };
  }

  private async postScores(c: Ctx, p: Params): Promise<Reply> {
    this.authorize(c.req);
    const board = parseBoard(p[0] as string);
    const body = parseJson(await readBody(c.req, c.res, LIMITS.maxScoreBodyBytes, 'score body', this.bodyTimeoutMs));
    if (body === null || typeof body !== 'object' || Array.isArray(body)) {
      throw new ApiError(400, 'bad_request', 'body must be a JSON object: {"member": "ann", "score": 12, "mode": "set"} or {"scores": [...]}');
    }
    const o = body as Record<string, unknown>;
    if (Object.hasOwn(o, 'scores')) {
      const extra = Object.keys(o).filter((k) => k !== 'scores');
      if (extra.length > 0) throw new ApiError(400, 'bad_request', `unknown field "${extra[0]}" beside "scores"`);
      const list = o['scores'];
      if (!Array.isArray(list) || list.length === 0 || list.length > LIMITS.maxBatch) {
        throw new ApiError(400, 'bad_request', `"scores" must be an array of 1 to ${LIMITS.maxBatch} entries`);
      }
      // Every entry is checked before anything is written: a bad batch writes nothing.
      const writes = list.map((e, i) => parseScoreEntry(e, `scores[${i}]`));
      // In groups: 1000 concurrent calls on one Redis connection can outlast its command timeout.
      await inGroups(writes, BATCH_CONCURRENCY, (w) => this.call((s) => s.score(board, w.member, w.score, w.mode)));
      const distinct = [...new Set(writes.map((w) => w.member))];
      const ranked = await inGroups(distinct, BATCH_CONCURRENCY, (m) => this.rankedAfterWrite(board, m));
      const byMember = new Map(ranked.map((r) => [r.member, r]));
      return { status: 200, body: { board, scores: writes.map((w) => byMember.get(w.member) as Ranked) } };
    }
    const w = parseScoreEntry(o, 'body');
    await this.call((s) => s.score(board, w.member, w.score, w.mode));
    return { status: 200, body: await this.rankedAfterWrite(board, w.member) };
  }

  private async rankedAfterWrite(board: string, member: string): Promise<Ranked> {
    const r = await this.call((s) => s.member(board, member));
    if (!r) throw new StoreError(`score of "${member}" on "${board}" missing right after it was written`);
    return r;
  }
}

// ---- parsing ----

function parseLobbyQuery(sp: URLSearchParams): LobbyQuery {
  const sort = parseEnum(sp, 'sort', LOBBY_SORTS) ?? 'sockets';
  const order = parseEnum(sp, 'order', ['asc', 'desc'] as const) ?? (sort === 'sockets' ? 'desc' : 'asc');
  const q: { -readonly [K in keyof LobbyQuery]: LobbyQuery[K] } = {
    sort,
    order,
    offset: parseInteger(sp, 'offset', 0, LIMITS.maxOffset) ?? 0,
    limit: parseInteger(sp, 'limit', 1, LIMITS.lobbyMaxLimit) ?? LIMITS.lobbyDefaultLimit,
  };
  const status = parseString(sp, 'status');
  const backend = parseString(sp, 'backend');
  const prefix = parseString(sp, 'prefix');
  const minSockets = parseInteger(sp, 'minSockets', 0, LIMITS.maxMinSockets);
  if (status !== undefined) q.status = status;
  if (backend !== undefined) q.backend = backend;
  if (prefix !== undefined) q.prefix = prefix;
  if (minSockets !== undefined) q.minSockets = minSockets;
  return q;
}

/** One value or none; a repeated parameter is refused rather than silently picking one. */
function single(sp: URLSearchParams, name: string): string | undefined {
  const all = sp.getAll(name);
  if (all.length > 1) throw new ApiError(400, 'bad_request', `query parameter "${name}" given ${all.length} times`);
  return all[0];
}

function parseString(sp: URLSearchParams, name: string): string | undefined {
  const v = single(sp, name);
  if (v === undefined || v === '') return undefined;
  if (v.length > LIMITS.maxFilterChars) throw new ApiError(400, 'bad_request', `query parameter "${name}" is over ${LIMITS.maxFilterChars} characters`);
  return v;
}

function parseInteger(sp: URLSearchParams, name: string, min: number, max: number): number | undefined {
  const v = single(sp, name);
  if (v === undefined || v === '') return undefined;
  const n = /^[0-9]{1,10}$/.test(v) ? Number(v) : NaN;
  if (!Number.isSafeInteger(n) || n < min || n > max) {
    throw new ApiError(400, 'bad_request', `query parameter "${name}" must be an integer from ${min} to ${max}, got "${clip(v)}"`);
  }
  return n;
}

function parseEnum<T extends string>(sp: URLSearchParams, name: string, allowed: readonly T[]): T | undefined {
  const v = single(sp, name);
  if (v === undefined || v === '') return undefined;
  if (!(allowed as readonly string[]).includes(v)) throw new ApiError(400, 'bad_request', `query parameter "${name}" must be one of ${allowed.join(' | ')}, got "${clip(v)}"`);
  return v as T;
}

function parseBool(sp: URLSearchParams, name: string): boolean {
  const v = single(sp, name);
  if (v === undefined || v === '') return false;
  if (v === '1' || v === 'true') return true;
  if (v === '0' || v === 'false') return false;
  throw new ApiError(400, 'bad_request', `query parameter "${name}" must be true | false | 1 | 0, got "${clip(v)}"`);
}

function parseBoard(name: string): string {
  if (!BOARD_PATTERN.test(name)) throw new ApiError(400, 'bad_request', 'invalid leaderboard name: 1 to 64 characters from A-Z a-z 0-9 _ . : -');
  return name;
}

function parseMember(v: unknown, where: string): string {
  if (typeof v !== 'string') throw new ApiError(400, 'bad_request', `${where}: member must be a string`);
  const chars = [...v].length;
  if (chars < 1 || chars > LIMITS.maxMemberChars || MEMBER_FORBIDDEN.test(v)) {
    throw new ApiError(400, 'bad_request', `${where}: member must be 1 to ${LIMITS.maxMemberChars} printable characters (no control characters)`);
  }
  return v;
}

interface ScoreWrite {
  readonly member: string;
  readonly score: number;
  readonly mode: ScoreMode;
}

function parseScoreEntry(e: unknown, where: string): ScoreWrite {
  if (e === null || typeof e !== 'object' || Array.isArray(e)) throw new ApiError(400, 'bad_request', `${where} must be an object {"member", "score", "mode"}`);
  const o = e as Record<string, unknown>;
  const extra = Object.keys(o).filter((k) => k !== 'member' && k !== 'score' && k !== 'mode');
  if (extra.length > 0) throw new ApiError(400, 'bad_request', `${where}: unknown field "${clip(extra[0] as string)}" (expected member, score, mode)`);
  const member = parseMember(o['member'], where);
  const score = o['score'];
  if (typeof score !== 'number' || !Number.isFinite(score) || Math.abs(score) > LIMITS.maxScoreMagnitude) {
    throw new ApiError(400, 'bad_request', `${where}: score must be a finite JSON number (not a string) of magnitude at most ${LIMITS.maxScoreMagnitude}`);
  }
  const mode = o['mode'] ?? 'set';
  if (typeof mode !== 'string' || !(SCORE_MODES as readonly string[]).includes(mode)) {
    throw new ApiError(400, 'bad_request', `${where}: mode must be one of ${SCORE_MODES.join(' | ')}`);
  }
  return { member, score, mode: mode as ScoreMode };
}

function parseJson(text: string): unknown {
  if (text.trim() === '') throw new ApiError(400, 'bad_request', 'empty body: a JSON object is expected');
  try {
    return JSON.parse(text) as unknown;
  } catch (err) {
    throw new ApiError(400, 'bad_request', `body is not valid JSON: ${errorMessage(err)}`);
  }
}

/**
 * Reads a request body of at most `cap` bytes. Beyond (declared or streamed), 413 with
 * `Connection: close`: the rest is not read, the connection is closed after the answer.
 * A body that does not arrive within timeoutMs is refused (408) the same way.
 */
function readBody(req: IncomingMessage, res: ServerResponse, cap: number, what: string, timeoutMs: number): Promise<string> {
  const tooLarge = (): ApiError => new ApiError(413, 'payload_too_large', `${what} over ${cap} bytes`, { Connection: 'close' });
  const declared = req.headers['content-length'];
  if (declared !== undefined && Number(declared) > cap) {
    res.shouldKeepAlive = false;
    return Promise.reject(tooLarge());
  }
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const done = (): void => {
      clearTimeout(timer);
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
      req.off('close', onClose);
    };
    const abort = (e: ApiError): void => {
      done();
      res.shouldKeepAlive = false;
      req.pause();
      reject(e);
    };
    const onData = (c: Buffer): void => {
      size += c.length;
      if (size > cap) return abort(tooLarge());
      chunks.push(c);
    };
    const onEnd = (): void => {
      done();
      const buf = Buffer.concat(chunks);
      const text = new TextDecoder('utf-8', { fatal: true, ignoreBOM: false });
      try {
        resolve(text.decode(buf));
      } catch {
        reject(new ApiError(400, 'bad_request', 'body is not valid UTF-8'));
      }
    };
    const onError = (err: Error): void => {
      done();
      reject(new ApiError(400, 'bad_request', `request body failed: ${err.message}`));
    };
    const onClose = (): void => {
      if (!req.complete) onError(new Error('client went away'));
    };
    const timer = setTimeout(() => abort(new ApiError(408, 'bad_request', `${what} not received within ${timeoutMs} ms`, { Connection: 'close' })), timeoutMs);
    timer.unref();
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
    req.on('close', onClose);
  });
}

// ---- responses ----

function sendJson(res: ServerResponse, status: number, text: string | undefined, headers: Readonly<Record<string, string>> = {}): void {
  if (res.headersSent || res.destroyed) return;
  if (text === undefined) {
    res.writeHead(status, { 'Cache-Control': 'no-store', ...headers });
    res.end();
    return;
  }
  res.writeHead(status, {
    'Content-Type': 'application/json; charset=utf-8',
    'Cache-Control': 'no-store',
    'X-Content-Type-Options': 'nosniff',
    'Content-Length': Buffer.byteLength(text),
    ...headers,
  });
  res.end(text);
}

function notFound(message: string): ApiError {
  return new ApiError(404, 'not_found', message);
}

function clip(s: string): string {
  return s.length > 64 ? `${s.slice(0, 64)}...` : s;
}

/** The first segment after the prefix (e.g. "rooms"), for logs: no room key or member in a log line. */
function routeLabel(url: string | undefined): string {
  const seg = (url ?? '').slice(API_PREFIX.length + 1).split(/[/?]/)[0] ?? '';
  return /^[a-z.]{1,20}$/.test(seg) ? seg : '?';
}

function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
