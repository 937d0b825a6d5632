// The zod schemas of the public data API (/_roomgate/api/): they validate every request with the
// messages the API has always given, and @fastify/swagger turns them into the OpenAPI document
// (src/control/openapi.ts). Schemas with an id are components of that document (as an input and an
// output variant where a transform makes them differ). Query values
// arrive as strings (a repeated parameter as an array: refused); '' counts as absent.
import { z } from 'zod';
import { STORE_RETRY_AFTER_S } from '../http/errors.js';
import { MAX_ROOM_KEY_LENGTH } from '../room/validate.js';

/** A component of the OpenAPI document: a schema with an id (zod's global registry, where .meta() also writes). */
const component = <T extends z.ZodType>(id: string, schema: T): T => schema.meta({ ...schema.meta(), id }) as T;

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
} as const;

export const BOARD_PATTERN = /^[A-Za-z0-9_.:-]{1,64}$/;
// Printable: no control characters (C0, DEL, C1) and no lone surrogates.
const MEMBER_FORBIDDEN = /[\p{Cc}\p{Cs}]/u;
const SCORE_MODES = ['set', 'incr', 'max'] as const;

const clip = (s: string): string => (s.length > 64 ? `${s.slice(0, 64)}...` : s);

// ---- query parameters ----

type Parsed<T> = { readonly value: T } | { readonly error: string };

/** A query parameter given once (or not at all); '' is absent; parse gives the value or says what is wrong. */
function queryParam<T>(name: string, parse: (v: string) => Parsed<T>, json: Record<string, unknown>) {
  return z
    .string({ error: (iss) => (Array.isArray(iss.input) ? `query parameter "${name}" given ${iss.input.length} times` : `query parameter "${name}" must be a string`) })
    // What the document says it takes (an integer, one of a list), not the string it arrives as.
    .meta(json)
    .optional()
    .transform((v, ctx): T | undefined => {
      if (v === undefined || v === '') return undefined;
      const r = parse(v);
      if ('value' in r) return r.value;
      ctx.issues.push({ code: 'custom', message: r.error, input: v });
      return z.NEVER;
    });
}

function intQuery(name: string, min: number, max: number, description: string, dflt?: number) {
  return queryParam<number>(
    name,
    (v) => {
      const n = /^[0-9]{1,10}$/.test(v) ? Number(v) : NaN;
      return Number.isSafeInteger(n) && n >= min && n <= max ? { value: n } : { error: `query parameter "${name}" must be an integer from ${min} to ${max}, got "${clip(v)}"` };
    },
    { type: 'integer', minimum: min, maximum: max, description, ...(dflt === undefined ? {} : { default: dflt }) },
  );
}

function stringQuery(name: string, description: string) {
  return queryParam<string>(name, (v) => (v.length > LIMITS.maxFilterChars ? { error: `query parameter "${name}" is over ${LIMITS.maxFilterChars} characters` } : { value: v }), {
    type: 'string',
    maxLength: LIMITS.maxFilterChars,
    description,
  });
}

function enumQuery<T extends string>(name: string, allowed: readonly T[], description: string, dflt?: T) {
  return queryParam<T>(
    name,
    (v) => ((allowed as readonly string[]).includes(v) ? { value: v as T } : { error: `query parameter "${name}" must be one of ${allowed.join(' | ')}, got "${clip(v)}"` }),
    { type: 'string', enum: [...allowed], description, ...(dflt === undefined ? {} : { default: dflt }) },
  );
}

function boolQuery(name: string, description: string) {
  return queryParam<boolean>(
    name,
    (v) => (v === '1' || v === 'true' ? { value: true } : v === '0' || v === 'false' ? { value: false } : { error: `query parameter "${name}" must be true | false | 1 | 0, got "${clip(v)}"` }),
    { type: 'string', enum: ['true', 'false', '1', '0'], description },
  );
}

/** A query parameter no longer offered: a clear 400 rather than a filter silently ignored. */
function refusedQuery(name: string, why: string) {
  return queryParam<never>(name, () => ({ error: `query parameter "${name}" is not offered: ${why}` }), { type: 'string', deprecated: true, description: `Refused (400): ${why}.` });
}

const LOBBY_FILTERS = {
  status: stringQuery('status', 'Only rooms whose meta.status equals this.'),
  prefix: stringQuery('prefix', 'Only rooms whose key starts with this.'),
  minSockets: intQuery('minSockets', 0, LIMITS.maxMinSockets, 'Only rooms with at least this many live sockets.'),
  sort: enumQuery('sort', ['sockets', 'since', 'room'] as const, 'Sort key.', 'sockets'),
  order: enumQuery('order', ['asc', 'desc'] as const, 'Default: desc for sort=sockets, asc for since (oldest first) and room.'),
  offset: intQuery('offset', 0, LIMITS.maxOffset, '0-based.', 0),
  limit: intQuery('limit', 1, LIMITS.lobbyMaxLimit, 'Rooms per page.', LIMITS.lobbyDefaultLimit),
};

/** GET /lobby and /lobby/stream: listed rooms only, never a backend id (docs/security.md). */
export const LobbyQuery = z.object({
  ...LOBBY_FILTERS,
  backend: refusedQuery('backend', "backend ids are not public; the admin port's GET /lobby takes it"),
});

/** The admin port's GET /lobby: every live room, with its backend. */
export const AdminLobbyQuery = z.object({ ...LOBBY_FILTERS, backend: stringQuery('backend', 'Only rooms on this backend id.') });

export const BoardQuery = z.object({
  offset: intQuery('offset', 0, LIMITS.maxOffset, '0-based.', 0),
  limit: intQuery('limit', 1, LIMITS.boardMaxLimit, 'Entries per page.', LIMITS.boardDefaultLimit),
});

export const MemberQuery = z.object({
  around: intQuery('around', 0, LIMITS.maxAround, 'Also return up to this many neighbours on each side (answer: MemberNeighbours).'),
});

export const MetaQuery = z.object({
  pinned: boolQuery('pinned', 'Keep the metadata after the room has no live sockets. Default false.'),
  listed: boolQuery('listed', 'The public reads (GET /lobby, its stream, GET /rooms/{room}, the lobby page) may name the room. Default true; false keeps it private (a room matching `api.listRooms` is listed all the same).'),
});

// ---- path parameters ----

const segment = (description: string, json: Record<string, unknown> = {}) => z.string().min(1, { error: 'empty path segment' }).meta({ description, ...json });

/** A room key: the gateway's own validator (room.pattern), so the schema is made per app. */
export function roomParams(validateRoom: (room: string) => boolean) {
  return z.object({
    room: segment(
      `A room key (room.pattern, default ^[A-Za-z0-9_.:-]{1,128}$, at most ${MAX_ROOM_KEY_LENGTH} characters), percent-encoded. Invalid: 400.`,
      { maxLength: MAX_ROOM_KEY_LENGTH },
    ).refine(validateRoom, { error: 'invalid room key: it does not match room.pattern (or is over 1024 characters)' }),
  });
}

const board = segment('A leaderboard name.', { pattern: BOARD_PATTERN.source }).regex(BOARD_PATTERN, {
  error: 'invalid leaderboard name: 1 to 64 characters from A-Z a-z 0-9 _ . : -',
});

/** 1 to 128 printable characters; messages say where ("member", "body", "scores[3]"). */
const memberText = (where: string) =>
  z.string({ error: `${where}: member must be a string` }).refine((v) => {
    const chars = [...v].length;
    return chars >= 1 && chars <= LIMITS.maxMemberChars && !MEMBER_FORBIDDEN.test(v);
  }, { error: `${where}: member must be 1 to ${LIMITS.maxMemberChars} printable characters (no control characters)` });

export const Member = component(
  'Member',
  z.string().min(1).max(LIMITS.maxMemberChars).meta({ description: '1 to 128 printable characters (code points, no control characters).' }),
);

export const BoardParams = z.object({ board });
export const MemberParams = z.object({
  board,
  member: segment('A member: 1 to 128 printable characters (no control characters), percent-encoded (a "/" as %2F).').pipe(memberText('member')),
});

// ---- bodies ----

export const RoomMeta = component(
  'RoomMeta',
  z
    .record(z.string(), z.unknown(), { error: 'room metadata must be a JSON object, e.g. {"status": "waiting", "title": "Room 42"}' })
    .meta({
      description: 'App-defined JSON object (at most api.maxMetaBytes bytes). `status` (a string) is filterable.',
      examples: [{ status: 'waiting', title: 'Room 42', players: 3 }],
    }),
);

const ScoreWrite = component(
  'ScoreWrite',
  z.strictObject(
    {
      member: memberText('{where}'),
      score: z
        .number({ error: `{where}: score must be a finite JSON number (not a string) of magnitude at most ${LIMITS.maxScoreMagnitude}` })
        .min(-LIMITS.maxScoreMagnitude, { error: `{where}: score must be a finite JSON number (not a string) of magnitude at most ${LIMITS.maxScoreMagnitude}` })
        .max(LIMITS.maxScoreMagnitude, { error: `{where}: score must be a finite JSON number (not a string) of magnitude at most ${LIMITS.maxScoreMagnitude}` })
        .meta({ description: 'A JSON number (a string such as "12" is a 400), finite, magnitude at most 2^53-1.' }),
      mode: z
        .enum(SCORE_MODES, { error: `{where}: mode must be one of ${SCORE_MODES.join(' | ')}` })
        .nullish()
        .transform((m) => m ?? 'set')
        .meta({ description: 'set: replace; incr: add to the current score (0 if none); max: keep the higher. Default set.' }),
    },
    {
      error: (iss) =>
        iss.code === 'unrecognized_keys'
          ? `{where}: unknown field "${clip(String(iss.keys[0]))}" (expected member, score, mode)`
          : '{where} must be an object {"member", "score", "mode"}',
    },
  ),
);

const ScoreBatch = component(
  'ScoreBatch',
  z.strictObject(
    {
      scores: z
        .array(ScoreWrite, { error: `"scores" must be an array of 1 to ${LIMITS.maxBatch} entries` })
        .min(1, { error: `"scores" must be an array of 1 to ${LIMITS.maxBatch} entries` })
        .max(LIMITS.maxBatch, { error: `"scores" must be an array of 1 to ${LIMITS.maxBatch} entries` }),
    },
    { error: (iss) => (iss.code === 'unrecognized_keys' ? `unknown field "${clip(String(iss.keys[0]))}" beside "scores"` : undefined) },
  ),
);

export const ScoresBody = z
  .union([ScoreBatch, ScoreWrite], {
    error: (iss) =>
      iss.input === null || typeof iss.input !== 'object' || Array.isArray(iss.input)
        ? 'body must be a JSON object: {"member": "ann", "score": 12, "mode": "set"} or {"scores": [...]}'
        : undefined,
  })
  .meta({
    examples: [{ member: 'ann', score: 12, mode: 'max' }, { scores: [{ member: 'ann', score: 1, mode: 'incr' }, { member: 'bob', score: 7 }] }],
  });

// ---- answers ----

/** Every code the public API answers. */
export const API_ERROR_CODES = [
  'bad_request',
  'unauthorized',
  'forbidden',
  'not_found',
  'payload_too_large',
  'method_not_allowed',
  'store_unavailable',
  'too_many_streams',
  'too_many_requests',
  'internal',
] as const;

export const ErrorBody = component(
  'Error',
  z
    .strictObject({
      error: z.strictObject({
        code: z.enum(API_ERROR_CODES),
        message: z.string().meta({ description: 'For people; may change. Match on code.' }),
      }),
    })
    .meta({ examples: [{ error: { code: 'not_found', message: 'no such room: it has no live sockets and no pinned metadata' } }] }),
);

export const Online = component(
  'Online',
  z.object({
    total: z.number().int().min(0).meta({ description: 'Live sockets over every gateway.' }),
    rooms: z.number().int().min(0).meta({ description: 'Rooms with at least one live socket, listed or not (a count: no key).' }),
  }),
);

export const LobbyRoom = component(
  'LobbyRoom',
  z
    .object({
      room: z.string(),
      sockets: z.number().int().min(0).meta({ description: 'Live sockets over every gateway (0: pinned metadata only).' }),
      since: z.string().meta({ format: 'date-time', description: 'When the room first had a live socket (no live socket: when its metadata was set).' }),
      meta: RoomMeta.nullable(),
      pinned: z.boolean(),
      listed: z.boolean().meta({ description: 'Listed by its metadata (PUT /rooms/{room}/meta, ?listed); false: listed by `api.listRooms` only (or, in the answer of a PUT with listed=false, not listed).' }),
    })
    .meta({ description: 'A listed room (docs/security.md). No backend id: the admin port has those.' }),
);

export const LobbyPage = component(
  'LobbyPage',
  z.object({
    rooms: z.array(LobbyRoom),
    total: z.number().int().min(0).meta({ description: 'Rooms matching the filter, before offset and limit.' }),
    nextOffset: z.number().int().nullable().meta({ description: 'Offset of the next page; null on the last.' }),
  }),
);

export const Ranked = component(
  'Ranked',
  z.object({
    member: Member,
    score: z.number(),
    rank: z.number().int().min(1).meta({ description: '1 = highest score; equal scores are ordered by member name.' }),
  }),
);

export const Leaderboard = component(
  'Leaderboard',
  z.object({
    board: z.string(),
    size: z.number().int().min(1).meta({ description: 'Members on the board.' }),
    entries: z.array(Ranked),
    nextOffset: z.number().int().nullable(),
  }),
);

export const MemberNeighbours = component(
  'MemberNeighbours',
  z.object({
    board: z.string(),
    member: Member,
    entries: z.array(Ranked).meta({ description: 'The member and up to `around` neighbours on each side, best first.' }),
  }),
);

export const ScoreBatchResult = component(
  'ScoreBatchResult',
  z.object({
    board: z.string(),
    scores: z.array(Ranked).meta({ description: 'One per entry, in order, after the whole batch.' }),
  }),
);

/** What an error status means on this API (the response descriptions of the document). */
export const ERROR_RESPONSES = {
  400: 'Invalid room key, board or member name, query parameter, JSON or body (code bad_request). A body that does not arrive within 10 s gets 408 with the same code.',
  401: 'Missing or wrong bearer token (code unauthorized), with WWW-Authenticate.',
  403: 'Writes are disabled: no token in api.tokens (code forbidden).',
  404: 'No such route, room, metadata, board or member (code not_found).',
  405: 'The route exists with other methods (code method_not_allowed); Allow lists them.',
  408: 'The body did not arrive within 10 s (code bad_request); the connection is closed.',
  413: 'Body over the limit (code payload_too_large); the connection is closed.',
  429: 'Too many wrong tokens from this address (`auth.maxFailures` per `auth.windowMs`; code too_many_requests, with Retry-After): the token is not checked until then.',
  500: 'A bug (code internal).',
  503: `The shared data store is unavailable (code store_unavailable, Retry-After: ${STORE_RETRY_AFTER_S}); routing is unaffected.`,
} as const;
