// What every write of the admin API shares (src/control/admin-routes.ts, src/control/routes/handoff.ts):
// the bearer-token check with the wrong-token throttle, and the small JSON-object body.
// Two kinds of token: admin.token allows every write; a drain token (admin.drainTokens) allows only
// the routes registered with the 'drain' scope (drain and undrain of a backend), where the route
// then checks which backend it may change (src/control/drain-scope.ts). Every other write answers
// a drain token 403. Both lists are compared on every request, as SHA-256 digests in constant time
// (src/http/auth.ts), so the timing tells neither whether nor which token matched.
import type { FastifyRequest } from 'fastify';
import { requestAddress, type AuthThrottle } from '../http/auth-throttle.js';
import { TokenCheck } from '../http/auth.js';
import { Errors, type HttpError } from '../http/errors.js';

/** The tokens of admin writes: admin.token ('' : none) and admin.drainTokens. */
export interface AdminTokens {
  readonly token: string;
  readonly drainTokens?: readonly string[];
}

/** admin: admin.token only; drain: admin.token or a drain token (the route then checks the backend). */
export type WriteScope = 'admin' | 'drain';

/** Requests let in by a drain token rather than admin.token. */
const byDrainTokenSet = new WeakSet<FastifyRequest>();

/** Whether the authorizer let this request in with a drain token (the route must then check its backend). */
export function byDrainToken(req: FastifyRequest): boolean {
  return byDrainTokenSet.has(req);
}

const WRONG = 'missing or wrong bearer token: send Authorization: Bearer <admin.token>';
const WRONG_OR_DRAIN = `${WRONG} or a drain token (admin.drainTokens)`;
const CHALLENGE = { headers: { 'WWW-Authenticate': 'Bearer realm="roomgate admin"' } };

/** The authorizer of admin writes: 403 without a token to accept, 401 for a wrong one, 403 for a drain token out of its scope, 429 when throttled. */
export function adminWriteAuthorizer(tokens: AdminTokens, throttle: AuthThrottle | null | undefined, scope: WriteScope = 'admin'): (req: FastifyRequest) => HttpError | null {
  const admin = new TokenCheck([tokens.token]);
  const drain = new TokenCheck(tokens.drainTokens ?? []);
  const enabled = scope === 'admin' ? admin.configured : admin.configured || drain.configured;
  return (req) => {
    if (!enabled) return Errors.forbidden('admin writes are disabled: set admin.token (or ROOMGATE_ADMIN_TOKEN)');
    const address = requestAddress(req.raw);
    const refused = throttle?.refusal(address, 'admin') ?? null;
    if (refused) return refused;
    const header = req.headers.authorization;
    // Both, always: the time taken says nothing about which one matched.
    const asAdmin = admin.verdict(header);
    const asDrain = drain.verdict(header);
    if (asAdmin === 'ok') return null;
    if (asDrain === 'ok') {
      if (scope === 'drain') {
        byDrainTokenSet.add(req);
        return null;
      }
      req.log.warn({ address, method: req.method, url: req.url }, 'admin: a drain token was sent for a write it does not allow');
      return Errors.forbidden('this token may only drain and undrain a backend; this write needs admin.token');
    }
    if (asAdmin === 'wrong') throttle?.failed(address);
    return Errors.unauthorized(scope === 'drain' && drain.configured ? WRONG_OR_DRAIN : WRONG, CHALLENGE);
  };
}

/** A write's body (at most 4 KiB, read by the app): a JSON object, or nothing ({}). */
export function jsonObject(text: string): unknown {
  const t = text.trim();
  if (t === '') return {};
  let v: unknown;
  try {
    v = JSON.parse(t);
  } catch {
    throw Errors.badRequest('body must be a JSON object');
  }
  if (v === null || typeof v !== 'object' || Array.isArray(v)) throw Errors.badRequest('body must be a JSON object');
  return v;
}
