// roomgate's browser script for per-tab rooms on the public port (src/pages/room-pin-script.ts),
// served while `room.sources` includes `pin`. Read-only: GET and HEAD, anything else 405.
import type { FastifyReply, FastifyRequest } from 'fastify';
import { ROOM_PIN_SCRIPT, ROOM_PIN_SCRIPT_HEADERS, ROOM_PIN_SCRIPT_PATH } from '../pages/room-pin-script.js';
import { sendText, type ControlApp, type RouteConfig } from './app.js';

export function registerScriptRoutes(app: ControlApp): void {
  const config: RouteConfig = { kind: 'page' };
  app.all(ROOM_PIN_SCRIPT_PATH, { config }, async (req: FastifyRequest, reply: FastifyReply) => {
    if (req.method !== 'GET' && req.method !== 'HEAD') return sendText(reply, 405, 'read-only: GET or HEAD\n', { Allow: 'GET, HEAD' });
    // A revalidation of the one version this name has: always current.
    if (req.headers['if-none-match'] === ROOM_PIN_SCRIPT_HEADERS.ETag) {
      const { 'Content-Length': _length, 'Content-Type': _type, ...rest } = ROOM_PIN_SCRIPT_HEADERS;
      return void reply.code(304).headers(rest).send();
    }
    reply.code(200).headers(ROOM_PIN_SCRIPT_HEADERS).send(ROOM_PIN_SCRIPT);
  });
}
