// room.pinInject on node:http's and HTTP/2's page path (src/proxy/http-proxy.ts): the backend's
// HTML body goes through the pin's scanner (src/http/pin-inject.ts) until it has decided, and the
// answer's head is written only then, with the Content-Length of what is sent; the rest of the
// body is piped as any answer's. The byte-level path does the same in PageRelay; the page cache in
// its fill. (A Transform stream in the way of every chunk cost about three times as much CPU per
// page: bench/pin-inject.ts.)
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { HeadScanner } from '../http/pin-inject.js';

/**
 * Relays `source` to `res` through `scan`: `writeHead(added)` once it decided (the bytes the tags
 * added, 0 when they did not go in; false: the head could not be written, and nothing more is).
 */
export function relayScanned(source: IncomingMessage, res: ServerResponse, scan: HeadScanner, writeHead: (added: number) => boolean): void {
  const decided = (pieces: readonly Buffer[]): boolean => {
    source.off('data', onData);
    source.off('end', onEnd);
    if (!writeHead(scan.added)) return false;
    for (const piece of pieces) res.write(piece);
    return true;
  };
  const onData = (chunk: Buffer): void => {
    const out = scan.feed(chunk);
    if (out !== null && decided(out)) source.pipe(res);
  };
  // The page ended before the scanner decided: its head, and all of it unchanged.
  const onEnd = (): void => {
    if (decided(scan.flush())) res.end();
  };
  source.on('data', onData);
  source.on('end', onEnd);
}
