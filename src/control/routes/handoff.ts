// The admin API's room handoff (docs/handoff.md): POST /rooms/{room}/move {"to": BACKEND}
// moves one room with its state, and the drain's handoff flag (POST /backends/{id}/drain
// {"handoff": true}) hands off every live room of the backend now. The gateway that receives the
// call runs the handoff; the answer says what became of it, with the reason when it failed.
import { adminWriteAuthorizer, jsonObject } from '../admin-writes.js';
import type { FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { AuthThrottle } from '../../http/auth-throttle.js';
import { Errors, type HttpError } from '../../http/errors.js';
import { MAX_ROOM_KEY_LENGTH, type RoomValidator } from '../../room/validate.js';
import type { DrainProgress, HandoffOutcome, RuntimeView } from '../../runtime/views.js';
import type { ControlApp, RouteConfig } from '../app.js';

export interface HandoffRoutesOptions {
  readonly view: RuntimeView;
  /** admin.token; '' refuses every write. */
  readonly token: string;
  /** admin.drainTokens: answered 403 here (a move is not a drain). */
  readonly drainTokens?: readonly string[];
  readonly throttle?: AuthThrottle | null;
  readonly validateRoom: RoomValidator;
  readonly roomPattern: string;
}

const MAX_BODY = 4096;
const BODY_TIMEOUT_MS = 10_000;
/** A busy backend frees a slot when one of its handoffs ends: about the time of one. */
const TOO_MANY_RETRY_AFTER_S = 1;

const MoveBody = z.strictObject({
  to: z.string({ error: 'give "to": the id of the backend the room moves to' }).min(1).meta({ description: 'The backend the room moves to.' }),
  id: z
    .string()
    .regex(/^[!-~]{1,128}$/, { error: 'id must be 1 to 128 visible ASCII characters' })
    .optional()
    .meta({ description: 'The handoff id: the same id again (a retry) is the same handoff, running or done. Default: a new one.' }),
});

/** A handoff's outcome as the admin API answers it: 200 when the room moved, else the error and the record. */
export function handoffAnswer(out: HandoffOutcome): { handoff: HandoffOutcome['event'] } {
  const { event } = out;
  const detail = { detail: { handoff: event } };
  switch (out.refusal) {
    case null:
      break;
    case 'store-unavailable':
      throw Errors.storeUnavailable(event.reason, detail);
    case 'too-many':
      throw Errors.unavailable(event.reason, { ...detail, headers: { 'Retry-After': String(TOO_MANY_RETRY_AFTER_S) } });
    case 'unknown-backend':
      throw Errors.notFound(event.reason, detail);
    case 'not-placed':
      throw Errors.roomNotLive(event.reason, detail);
    default:
      throw Errors.conflict(event.reason, detail);
  }
  if (event.result === 'moved' || event.result === 'moved-empty') return { handoff: event };
  throw Errors.badGateway(event.reason, detail);
}

/** The drain's answer with its handoff progress (the drain route calls it for {"handoff": true}). */
export function withDrainHandoff(view: RuntimeView, backend: string, answer: unknown): { handoff: DrainProgress } & Record<string, unknown> {
  return { ...(answer as Record<string, unknown>), handoff: view.drainWithHandoff(backend) };
}

export function registerHandoffRoutes(app: ControlApp, o: HandoffRoutesOptions): void {
  const authorize = adminWriteAuthorizer({ token: o.token, drainTokens: o.drainTokens ?? [] }, o.throttle);
  const validRoom = (req: FastifyRequest): HttpError | null => {
    const room = (req.params as { room?: string }).room ?? '';
    if (o.validateRoom(room)) return null;
    return Errors.invalidRoomKey(`invalid room key: it must match room.pattern ${o.roomPattern} and be 1 to ${MAX_ROOM_KEY_LENGTH} characters`, {
      detail: { pattern: o.roomPattern, maxLength: MAX_ROOM_KEY_LENGTH },
    });
  };
  const write: RouteConfig = {
    kind: 'admin',
    authorize,
    precheck: validRoom,
    body: { cap: MAX_BODY, what: 'body', timeoutMs: BODY_TIMEOUT_MS, excess: 'drain', parse: jsonObject },
  };
  app.post('/rooms/:room/move', { config: write, schema: { params: z.object({ room: z.string() }), body: MoveBody } }, async (req) =>
    handoffAnswer(await o.view.moveRoom(req.params.room, req.body.to, req.body.id)),
  );
}
