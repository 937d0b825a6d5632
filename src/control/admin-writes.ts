// What every write of the admin API shares (src/control/admin-routes.ts, src/control/routes/handoff.ts):
// the bearer-token check with the wrong-token throttle, and the small JSON-object body.
import type { FastifyRequest } from 'fastify';
import { requestAddress, throttledVerdict, type AuthThrottle } from '../http/auth-throttle.js';
import { TokenCheck } from '../http/auth.js';
import { Errors, type HttpError } from '../http/errors.js';

/** The authorizer of admin writes: 403 without admin.token, 401 for a wrong one, 429 when throttled. */
export function adminWriteAuthorizer(token: string, throttle: AuthThrottle | null | undefined): (req: FastifyRequest) => HttpError | null {
  const tokens = new TokenCheck([token]);
  return (req) => {
    if (!tokens.configured) return Errors.forbidden('admin writes are disabled: set admin.token (or ROOMGATE_ADMIN_TOKEN)');
    const verdict = throttledVerdict(tokens, throttle ?? null, 'admin', req.headers.authorization, requestAddress(req.raw));
    if (verdict === 'ok') return null;
    if (typeof verdict !== 'string') return verdict;
    return Errors.unauthorized('missing or wrong bearer token: send Authorization: Bearer <admin.token>', { headers: { 'WWW-Authenticate': 'Bearer realm="roomgate admin"' } });
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
