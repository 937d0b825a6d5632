// The head of every server-sent-event stream roomgate serves itself (lobby stream, status stream).
import type { IncomingMessage, ServerResponse } from 'node:http';

/** Writes the event-stream head; frames are flushed at once (no Nagle, no proxy buffering). */
export function openEventStream(req: IncomingMessage, res: ServerResponse): void {
  res.writeHead(200, {
    'Content-Type': 'text/event-stream; charset=utf-8',
    'Cache-Control': 'no-store',
    'X-Content-Type-Options': 'nosniff',
    // nginx and similar proxies: do not buffer the stream.
    'X-Accel-Buffering': 'no',
  });
  req.socket.setNoDelay(true);
}
