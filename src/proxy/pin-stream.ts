// room.pinInject on node:http's and HTTP/2's page path (src/proxy/http-proxy.ts): the backend's
// HTML body passes through the pin's scanner (src/http/pin-inject.ts), and the answer's head is
// written only once the scanner has decided (tags in, or not), with the Content-Length of what is
// sent. The byte-level path does the same in PageRelay; the page cache in its fill.
import { Transform } from 'node:stream';
import type { HeadScanner } from '../http/pin-inject.js';

/**
 * A body stream for one page: kept until `scan` decides, then `writeHead(added)` (the bytes the
 * tags added, 0 when they did not go in; false: the head could not be written, and the body
 * stops) and every byte after it unchanged.
 */
export function scannedBody(scan: HeadScanner, writeHead: (added: number) => boolean): Transform {
  const refused = (): Error => Object.assign(new Error('the answer head was refused'), { code: 'EHEADREFUSED' });
  return new Transform({
    transform(chunk: Buffer, _enc, cb) {
      if (!scan.pending) return cb(null, chunk);
      const out = scan.feed(chunk);
      if (out === null) return cb();
      if (!writeHead(scan.added)) return cb(refused());
      cb(null, out);
    },
    flush(cb) {
      if (!scan.pending) return cb();
      // The page ended before the scanner decided: its head, and all of it unchanged.
      const out = scan.flush();
      if (!writeHead(0)) return cb(refused());
      if (out.length > 0) this.push(out);
      cb();
    },
  });
}
