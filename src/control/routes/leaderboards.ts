// Leaderboards on the public API: GET /_roomgate/api/leaderboards/{board} (a page, highest first),
// GET .../members/{member} (one member's rank, or with its neighbours) and POST .../scores (token:
// one score or a batch). A board exists once it has a score. The reads need no token and are served
// only with api.publicReads.
import { Errors, type HttpError } from '../../http/errors.js';
import type { Ranked as RankedValue } from '../../shared-data/store.js';
import { SECURITY, responses, type ApiContext } from '../api-routes.js';
import { BoardParams, BoardQuery, LIMITS, Leaderboard, MemberNeighbours, MemberParams, MemberQuery, Ranked, ScoreBatchResult, ScoresBody } from '../api-schemas.js';
import type { ControlApp } from '../app.js';

export interface LeaderboardRoutesOptions {
  readonly api: ApiContext;
}

const BATCH_CONCURRENCY = 50;

const SCORES_DESCRIPTION = [
  'Body at most 65536 bytes. A batch is validated entirely before anything is written (one bad entry: 400, nothing',
  "written); its entries are applied in order. The answer gives each member's score and rank after the write (for a",
  'batch: after the whole batch, in the order of the entries, so a member listed twice appears twice with its final score).',
  'A batch is not a transaction: if the store fails midway (503), part of it may have been written.',
].join(' ');

/** Runs fn over items, at most `size` at a time, keeping the order of results. */
async function inGroups<T, R>(items: readonly T[], size: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const out: R[] = [];
  for (let i = 0; i < items.length; i += size) out.push(...(await Promise.all(items.slice(i, i + size).map(fn))));
  return out;
}

const boardNotFound = (board: string): HttpError => Errors.notFound(`no leaderboard "${board}" (a board exists once it has a score)`);

/** A fastify plugin, registered with prefix API_PREFIX. */
export async function leaderboardRoutes(app: ControlApp, o: LeaderboardRoutesOptions): Promise<void> {
  const { call, send, write } = o.api;
  const rankedAfterWrite = async (board: string, member: string): Promise<RankedValue> => {
    const r = await call((s) => s.member(board, member));
    if (!r) return call(() => Promise.reject(new Error(`score of "${member}" on "${board}" missing right after it was written`)));
    return r;
  };

  if (o.api.publicReads) boardReads(app, o.api);

  app.post(
    '/leaderboards/:board/scores',
    {
      config: write(LIMITS.maxScoreBodyBytes, 'score body'),
      schema: {
        tags: ['leaderboards'],
        operationId: 'postScores',
        summary: 'Writes one score, or a batch of up to 1000; the board is created by its first score.',
        description: SCORES_DESCRIPTION,
        security: SECURITY,
        params: BoardParams,
        body: ScoresBody,
        response: responses(
          { 200: { description: 'Ranked for one score, ScoreBatchResult for a batch.', schema: Ranked.or(ScoreBatchResult) } },
          { input: true, write: true, body: true, store: true },
        ),
      },
    },
    async (req, reply) => {
      const board = req.params.board;
      const body = req.body;
      if ('scores' in body) {
        const writes = body.scores;
        // In groups: 1000 concurrent calls on one Redis connection can outlast its command timeout.
        await inGroups(writes, BATCH_CONCURRENCY, (w) => call((s) => s.score(board, w.member, w.score, w.mode)));
        const distinct = [...new Set(writes.map((w) => w.member))];
        const ranked = await inGroups(distinct, BATCH_CONCURRENCY, (m) => rankedAfterWrite(board, m));
        const byMember = new Map(ranked.map((r) => [r.member, r]));
        return send(reply, { board, scores: writes.map((w) => byMember.get(w.member) as RankedValue) });
      }
      await call((s) => s.score(board, body.member, body.score, body.mode));
      return send(reply, await rankedAfterWrite(board, body.member));
    },
  );
}

/** The two reads of a board (no token): registered only with api.publicReads. */
function boardReads(app: ControlApp, ctx: ApiContext): void {
  const { api, call, send } = ctx;
  app.get(
    '/leaderboards/:board',
    {
      config: api(),
      schema: {
        tags: ['leaderboards'],
        operationId: 'getLeaderboard',
        summary: 'One page of a board, highest score first (rank 1). 404 for a board without any score.',
        params: BoardParams,
        querystring: BoardQuery,
        response: responses({ 200: { description: 'The page.', schema: Leaderboard } }, { input: true, notFound: true, store: true }),
      },
    },
    async (req, reply) => {
      const board = req.params.board;
      const offset = req.query.offset ?? 0;
      const limit = req.query.limit ?? LIMITS.boardDefaultLimit;
      if (!(await call((s) => s.boardExists(board)))) throw boardNotFound(board);
      const [size, entries] = await Promise.all([call((s) => s.boardSize(board)), call((s) => s.top(board, offset, limit))]);
      return send(reply, { board, size, entries, nextOffset: offset + entries.length < size && entries.length > 0 ? offset + entries.length : null });
    },
  );

  app.get(
    '/leaderboards/:board/members/:member',
    {
      config: api(),
      schema: {
        tags: ['leaderboards'],
        operationId: 'getLeaderboardMember',
        summary: "A member's score and rank; with `around`, the member and its neighbours.",
        params: MemberParams,
        querystring: MemberQuery,
        response: responses(
          { 200: { description: 'Ranked without `around`, MemberNeighbours with it.', schema: Ranked.or(MemberNeighbours) } },
          { input: true, notFound: true, store: true },
        ),
      },
    },
    async (req, reply) => {
      const { board, member } = req.params;
      const around = req.query.around;
      if (!(await call((s) => s.boardExists(board)))) throw boardNotFound(board);
      const missing = (): HttpError => Errors.notFound(`"${member.length > 64 ? `${member.slice(0, 64)}...` : member}" has no score on leaderboard "${board}"`);
      if (around === undefined) {
        const r = await call((s) => s.member(board, member));
        if (!r) throw missing();
        return send(reply, r);
      }
      const entries = await call((s) => s.around(board, member, around));
      if (!entries.some((e) => e.member === member)) throw missing();
      return send(reply, { board, member, entries });
    },
  );
}
