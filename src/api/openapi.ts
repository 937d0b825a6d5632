// The OpenAPI 3.1 description of the public data API (GET /_roomgate/api/openapi.json). A constant:
// limits that come from the configuration (api.maxMetaBytes) are named, not inlined. Kept beside
// public-api.ts; the tests check that every route there is described here and every $ref resolves.

const errorCodes = [
  'bad_request',
  'unauthorized',
  'forbidden',
  'not_found',
  'payload_too_large',
  'method_not_allowed',
  'store_unavailable',
  'too_many_streams',
  'internal',
] as const;

const json = (schema: object, description: string, extra: object = {}): object => ({
  description,
  ...extra,
  content: { 'application/json': { schema } },
});
const ref = (name: string): { $ref: string } => ({ $ref: `#/components/schemas/${name}` });
const resp = (name: string): { $ref: string } => ({ $ref: `#/components/responses/${name}` });
const param = (name: string): { $ref: string } => ({ $ref: `#/components/parameters/${name}` });

/** Errors any route can answer. */
const common = {
  '400': resp('BadRequest'),
  '404': resp('NotFound'),
  '405': resp('MethodNotAllowed'),
  '500': resp('Internal'),
  '503': resp('StoreUnavailable'),
};
const writeErrors = {
  '401': resp('Unauthorized'),
  '403': resp('Forbidden'),
  '413': resp('PayloadTooLarge'),
};

const lobbyFilterParams = [
  param('status'),
  param('backend'),
  param('prefix'),
  param('minSockets'),
  param('sort'),
  param('order'),
  param('offset'),
  param('lobbyLimit'),
];

export const OPENAPI_DOCUMENT = {
  openapi: '3.1.0',
  info: {
    title: 'roomgate public data API',
    version: '1',
    summary: 'Who is online, the lobby (also as Server-Sent Events), room metadata and leaderboards.',
    description: [
      'Served by every roomgate gateway on its public port under /_roomgate/api/, from the shared data store',
      '(in memory for one gateway, Redis for several). Reads are public; writes need `Authorization: Bearer <token>`',
      'with a token from `api.tokens` (ROOMGATE_API_TOKENS), or that token as a Basic password; the scheme in any case.',
      'With no token configured every write is refused (403).',
      'Every error has the shape `{"error": {"code", "message"}}`. When the shared store is down these routes answer',
      '503 `store_unavailable` with `Retry-After: 2`; routing of pages and sockets is unaffected.',
      'Room keys are checked with the gateway\'s room key rules (room.pattern, at most 1024 characters) before any store',
      'access. Unknown query parameters are ignored; a known one given twice is a 400. No CORS headers are sent',
      '(same origin only). Every GET also answers HEAD.',
    ].join(' '),
    license: { name: 'MIT', identifier: 'MIT' },
  },
  servers: [{ url: '/_roomgate/api' }],
  tags: [
    { name: 'presence', description: 'Live sockets summed over every gateway.' },
    { name: 'lobby', description: 'Rooms with live sockets over every gateway, with their app metadata.' },
    { name: 'leaderboards', description: 'Named score boards; a board exists once it has a score.' },
    { name: 'meta', description: 'This document.' },
  ],
  paths: {
    '/online': {
      get: {
        tags: ['presence'],
        operationId: 'getOnline',
        summary: 'Live sockets: total, rooms with live sockets, sockets per backend.',
        responses: { '200': json(ref('Online'), 'The counts.'), ...common },
      },
    },
    '/lobby': {
      get: {
        tags: ['lobby'],
        operationId: 'getLobby',
        summary: 'One page of the lobby, filtered and sorted.',
        parameters: lobbyFilterParams,
        responses: { '200': json(ref('LobbyPage'), 'The page.'), ...common },
      },
    },
    '/lobby/stream': {
      get: {
        tags: ['lobby'],
        operationId: 'streamLobby',
        summary: 'The lobby as Server-Sent Events.',
        description: [
          'Takes the same query parameters as GET /lobby. The stream starts with `retry: 2000`, then',
          '`event: snapshot` (data: LobbySnapshot, the first page of the query). Changes of rooms made on any gateway follow',
          'as `event: rooms` (data: LobbyChanges), at most once per `api.streamIntervalMs` (default 500 ms): every change of',
          'an interval is in one event; a room that left the query\'s view (empty, or no longer matching status, backend or',
          'minSockets) is sent as `{"room", "gone": true}`. Changed rooms may fall outside the requested page (sort, offset,',
          'limit): the client places them itself. A comment line `: ping` comes every 15 s. While the shared store is down',
          'the stream sends `event: unavailable` (data: Error) once and stays open; when the store is back it sends a fresh',
          '`event: snapshot`, which replaces the whole list (a very large change set is also sent as a snapshot).',
          'The stream ends when the gateway shuts down; EventSource reconnects after 2 s.',
        ].join(' '),
        parameters: lobbyFilterParams,
        responses: {
          '200': {
            description: 'An event stream (text/event-stream): snapshot, rooms, unavailable events and ping comments.',
            content: {
              'text/event-stream': {
                schema: { type: 'string' },
                example: 'retry: 2000\n\nevent: snapshot\ndata: {"rooms":[],"total":0,"nextOffset":null,"online":{"total":0,"rooms":0,"byBackend":{}}}\n\n',
              },
            },
          },
          '400': resp('BadRequest'),
          '405': resp('MethodNotAllowed'),
          '503': resp('StreamUnavailable'),
        },
        'x-events': {
          snapshot: ref('LobbySnapshot'),
          rooms: ref('LobbyChanges'),
          unavailable: ref('Error'),
        },
      },
    },
    '/rooms/{room}': {
      get: {
        tags: ['lobby'],
        operationId: 'getRoom',
        summary: 'One room: live (sockets > 0), or known by its metadata only (sockets 0).',
        parameters: [param('room')],
        responses: { '200': json(ref('LobbyRoom'), 'The room.'), ...common },
      },
    },
    '/rooms/{room}/meta': {
      put: {
        tags: ['lobby'],
        operationId: 'putRoomMeta',
        summary: 'Sets (replaces) a room\'s metadata.',
        description: [
          'The body is the metadata itself: any JSON object, at most `api.maxMetaBytes` bytes (default 4096) as sent, else',
          '413. Its `status` field, if a string, is what GET /lobby?status= filters on. Without `pinned`, metadata lives while',
          'the room has live sockets, and for one presence TTL (presence.ttlMs) after it was set or after the room was last',
          'reported live, so it can be set just before the first socket arrives. With `?pinned=true` it stays until deleted',
          '(GET /rooms/{room} then finds the room even when empty; the lobby lists live rooms only). The answer is the room as',
          'stored; a room without live sockets has sockets 0, backend "" and since = when the metadata was set.',
        ].join(' '),
        security: [{ bearer: [] }, { basic: [] }],
        parameters: [param('room'), param('pinned')],
        requestBody: {
          required: true,
          content: {
            'application/json': {
              schema: ref('RoomMeta'),
              example: { status: 'waiting', title: 'Room 42', players: 3 },
            },
          },
        },
        responses: { '200': json(ref('LobbyRoom'), 'The room with its new metadata.'), ...writeErrors, ...common },
      },
      delete: {
        tags: ['lobby'],
        operationId: 'deleteRoomMeta',
        summary: 'Removes a room\'s metadata (pinned or not).',
        security: [{ bearer: [] }, { basic: [] }],
        parameters: [param('room')],
        responses: {
          '204': { description: 'Removed.' },
          '401': resp('Unauthorized'),
          '403': resp('Forbidden'),
          ...common,
        },
      },
    },
    '/leaderboards/{board}': {
      get: {
        tags: ['leaderboards'],
        operationId: 'getLeaderboard',
        summary: 'One page of a board, highest score first (rank 1). 404 for a board without any score.',
        parameters: [param('board'), param('offset'), param('boardLimit')],
        responses: { '200': json(ref('Leaderboard'), 'The page.'), ...common },
      },
    },
    '/leaderboards/{board}/members/{member}': {
      get: {
        tags: ['leaderboards'],
        operationId: 'getLeaderboardMember',
        summary: 'A member\'s score and rank; with `around`, the member and its neighbours.',
        parameters: [
          param('board'),
          param('member'),
          {
            name: 'around',
            in: 'query',
            required: false,
            description: 'Also return up to this many neighbours on each side (answer: MemberNeighbours).',
            schema: { type: 'integer', minimum: 0, maximum: 100 },
          },
        ],
        responses: {
          '200': json({ oneOf: [ref('Ranked'), ref('MemberNeighbours')] }, 'Ranked without `around`, MemberNeighbours with it.'),
          ...common,
        },
      },
    },
    '/leaderboards/{board}/scores': {
      post: {
        tags: ['leaderboards'],
        operationId: 'postScores',
        summary: 'Writes one score, or a batch of up to 1000; the board is created by its first score.',
        description: [
          'Body at most 65536 bytes. A batch is validated entirely before anything is written (one bad entry: 400, nothing',
          'written); its entries are applied in order. The answer gives each member\'s score and rank after the write (for a',
          'batch: after the whole batch, in the order of the entries, so a member listed twice appears twice with its final score).',
          'A batch is not a transaction: if the store fails midway (503), part of it may have been written.',
        ].join(' '),
        security: [{ bearer: [] }, { basic: [] }],
        parameters: [param('board')],
        requestBody: {
          required: true,
          content: {
            'application/json': {
              schema: { oneOf: [ref('ScoreWrite'), ref('ScoreBatch')] },
              examples: {
                one: { value: { member: 'ann', score: 12, mode: 'max' } },
                batch: { value: { scores: [{ member: 'ann', score: 1, mode: 'incr' }, { member: 'bob', score: 7 }] } },
              },
            },
          },
        },
        responses: {
          '200': json({ oneOf: [ref('Ranked'), ref('ScoreBatchResult')] }, 'Ranked for one score, ScoreBatchResult for a batch.'),
          ...writeErrors,
          ...common,
        },
      },
    },
    '/openapi.json': {
      get: {
        tags: ['meta'],
        operationId: 'getOpenApi',
        summary: 'This document.',
        responses: { '200': json({ type: 'object' }, 'The OpenAPI 3.1 document.'), '405': resp('MethodNotAllowed') },
      },
    },
  },
  components: {
    securitySchemes: {
      bearer: { type: 'http', scheme: 'bearer', description: 'A token from api.tokens (ROOMGATE_API_TOKENS), compared in constant time.' },
      basic: { type: 'http', scheme: 'basic', description: 'The same token as the password (any user name), e.g. from a browser prompt.' },
    },
    parameters: {
      room: {
        name: 'room',
        in: 'path',
        required: true,
        description: 'A room key (room.pattern, default ^[A-Za-z0-9_.:-]{1,128}$, at most 1024 characters), percent-encoded. Invalid: 400.',
        schema: { type: 'string', minLength: 1, maxLength: 1024 },
      },
      board: {
        name: 'board',
        in: 'path',
        required: true,
        description: 'A leaderboard name.',
        schema: { type: 'string', pattern: '^[A-Za-z0-9_.:-]{1,64}$' },
      },
      member: {
        name: 'member',
        in: 'path',
        required: true,
        description: 'A member: 1 to 128 printable characters (no control characters), percent-encoded (a "/" as %2F).',
        schema: ref('Member'),
      },
      pinned: {
        name: 'pinned',
        in: 'query',
        required: false,
        description: 'Keep the metadata after the room has no live sockets. Default false.',
        schema: { type: 'string', enum: ['true', 'false', '1', '0'] },
      },
      status: {
        name: 'status',
        in: 'query',
        required: false,
        description: 'Only rooms whose meta.status equals this.',
        schema: { type: 'string', maxLength: 1024 },
      },
      backend: { name: 'backend', in: 'query', required: false, description: 'Only rooms on this backend id.', schema: { type: 'string', maxLength: 1024 } },
      prefix: { name: 'prefix', in: 'query', required: false, description: 'Only rooms whose key starts with this.', schema: { type: 'string', maxLength: 1024 } },
      minSockets: {
        name: 'minSockets',
        in: 'query',
        required: false,
        description: 'Only rooms with at least this many live sockets.',
        schema: { type: 'integer', minimum: 0, maximum: 1_000_000_000 },
      },
      sort: { name: 'sort', in: 'query', required: false, schema: { type: 'string', enum: ['sockets', 'since', 'room'], default: 'sockets' } },
      order: {
        name: 'order',
        in: 'query',
        required: false,
        description: 'Default: desc for sort=sockets, asc for since (oldest first) and room.',
        schema: { type: 'string', enum: ['asc', 'desc'] },
      },
      offset: { name: 'offset', in: 'query', required: false, description: '0-based.', schema: { type: 'integer', minimum: 0, maximum: 1_000_000_000, default: 0 } },
      lobbyLimit: { name: 'limit', in: 'query', required: false, schema: { type: 'integer', minimum: 1, maximum: 500, default: 50 } },
      boardLimit: { name: 'limit', in: 'query', required: false, schema: { type: 'integer', minimum: 1, maximum: 500, default: 50 } },
    },
    responses: {
      BadRequest: json(ref('Error'), 'Invalid room key, board or member name, query parameter, JSON or body (code bad_request). A body that does not arrive within 10 s gets 408 with the same code.'),
      Unauthorized: json(ref('Error'), 'Missing or wrong bearer token (code unauthorized).', {
        headers: { 'WWW-Authenticate': { schema: { type: 'string' } } },
      }),
      Forbidden: json(ref('Error'), 'Writes are disabled: no token in api.tokens (code forbidden).'),
      NotFound: json(ref('Error'), 'No such route, room, metadata, board or member (code not_found).'),
      MethodNotAllowed: json(ref('Error'), 'The route exists with other methods (code method_not_allowed).', {
        headers: { Allow: { description: 'The methods of the route.', schema: { type: 'string' } } },
      }),
      PayloadTooLarge: json(ref('Error'), 'Body over the limit (code payload_too_large); the connection is closed.'),
      StoreUnavailable: json(ref('Error'), 'The shared data store is unavailable (code store_unavailable); routing is unaffected.', {
        headers: { 'Retry-After': { description: 'Seconds.', schema: { type: 'integer', const: 2 } } },
      }),
      StreamUnavailable: json(
        ref('Error'),
        'No stream now: every event stream slot of this port is taken (code too_many_streams, `api.maxStreams`, Retry-After: 5; a slot frees when a stream closes), or the gateway is shutting down (code store_unavailable, Retry-After: 2).',
        { headers: { 'Retry-After': { description: 'Seconds.', schema: { type: 'integer', enum: [2, 5] } } } },
      ),
      Internal: json(ref('Error'), 'A bug (code internal).'),
    },
    schemas: {
      Error: {
        type: 'object',
        required: ['error'],
        additionalProperties: false,
        properties: {
          error: {
            type: 'object',
            required: ['code', 'message'],
            additionalProperties: false,
            properties: {
              code: { type: 'string', enum: [...errorCodes] },
              message: { type: 'string', description: 'For people; may change. Match on code.' },
            },
          },
        },
        example: { error: { code: 'not_found', message: 'no such room: it has no live sockets and no pinned metadata' } },
      },
      Online: {
        type: 'object',
        required: ['total', 'rooms', 'byBackend'],
        properties: {
          total: { type: 'integer', minimum: 0, description: 'Live sockets over every gateway.' },
          rooms: { type: 'integer', minimum: 0, description: 'Rooms with at least one live socket.' },
          byBackend: { type: 'object', additionalProperties: { type: 'integer', minimum: 0 }, description: 'Live sockets per backend id.' },
        },
      },
      RoomMeta: {
        type: 'object',
        description: 'App-defined JSON object (at most api.maxMetaBytes bytes). `status` (a string) is filterable.',
        additionalProperties: true,
      },
      LobbyRoom: {
        type: 'object',
        required: ['room', 'backend', 'sockets', 'since', 'meta', 'pinned'],
        properties: {
          room: { type: 'string' },
          backend: { type: 'string', description: 'The backend holding the room\'s sockets ("" when it has none).' },
          sockets: { type: 'integer', minimum: 0, description: 'Live sockets over every gateway (0: pinned metadata only).' },
          since: { type: 'string', format: 'date-time', description: 'When the room first had a live socket (no live socket: when its metadata was set).' },
          meta: { oneOf: [ref('RoomMeta'), { type: 'null' }] },
          pinned: { type: 'boolean' },
        },
      },
      RoomGone: {
        type: 'object',
        required: ['room', 'gone'],
        properties: { room: { type: 'string' }, gone: { const: true } },
        description: 'In a stream `rooms` event: the room left this view (emptied or no longer matches).',
      },
      LobbyPage: {
        type: 'object',
        required: ['rooms', 'total', 'nextOffset'],
        properties: {
          rooms: { type: 'array', items: ref('LobbyRoom') },
          total: { type: 'integer', minimum: 0, description: 'Rooms matching the filter, before offset and limit.' },
          nextOffset: { type: ['integer', 'null'], description: 'Offset of the next page; null on the last.' },
        },
      },
      LobbySnapshot: {
        allOf: [ref('LobbyPage'), { type: 'object', required: ['online'], properties: { online: ref('Online') } }],
      },
      LobbyChanges: {
        type: 'object',
        required: ['rooms', 'online'],
        properties: {
          rooms: { type: 'array', items: { oneOf: [ref('LobbyRoom'), ref('RoomGone')] } },
          online: ref('Online'),
        },
      },
      Member: {
        type: 'string',
        minLength: 1,
        maxLength: 128,
        pattern: '^[^\\p{Cc}]+$',
        description: '1 to 128 printable characters (code points).',
      },
      Ranked: {
        type: 'object',
        required: ['member', 'score', 'rank'],
        properties: {
          member: ref('Member'),
          score: { type: 'number' },
          rank: { type: 'integer', minimum: 1, description: '1 = highest score; equal scores are ordered by member name.' },
        },
      },
      Leaderboard: {
        type: 'object',
        required: ['board', 'size', 'entries', 'nextOffset'],
        properties: {
          board: { type: 'string' },
          size: { type: 'integer', minimum: 1, description: 'Members on the board.' },
          entries: { type: 'array', items: ref('Ranked') },
          nextOffset: { type: ['integer', 'null'] },
        },
      },
      MemberNeighbours: {
        type: 'object',
        required: ['board', 'member', 'entries'],
        properties: {
          board: { type: 'string' },
          member: ref('Member'),
          entries: { type: 'array', items: ref('Ranked'), description: 'The member and up to `around` neighbours on each side, best first.' },
        },
      },
      ScoreWrite: {
        type: 'object',
        required: ['member', 'score'],
        additionalProperties: false,
        properties: {
          member: ref('Member'),
          score: {
            type: 'number',
            description: 'A JSON number (a string such as "12" is a 400), finite, magnitude at most 2^53-1.',
            minimum: -9007199254740991,
            maximum: 9007199254740991,
          },
          mode: {
            type: 'string',
            enum: ['set', 'incr', 'max'],
            default: 'set',
            description: 'set: replace; incr: add to the current score (0 if none); max: keep the higher.',
          },
        },
      },
      ScoreBatch: {
        type: 'object',
        required: ['scores'],
        additionalProperties: false,
        properties: { scores: { type: 'array', minItems: 1, maxItems: 1000, items: ref('ScoreWrite') } },
      },
      ScoreBatchResult: {
        type: 'object',
        required: ['board', 'scores'],
        properties: {
          board: { type: 'string' },
          scores: { type: 'array', items: ref('Ranked'), description: 'One per entry, in order, after the whole batch.' },
        },
      },
    },
  },
} as const;
