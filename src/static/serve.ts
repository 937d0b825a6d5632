// Static mounts: URL prefix -> directory, served by roomgate itself on the event loop so app
// processes never spend a worker on a stylesheet. GET and HEAD only; ETag/Last-Modified with
// 304s, one byte range (206/416), precompressed .br/.gz variants, long caching of hashed names.
// A path under a mount is always answered here (404 when missing): it never reaches a backend.
import { createReadStream } from 'node:fs';
import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import { pipeline } from 'node:stream';
import type { Logger } from '../observability/logger.js';
import { plainResponse } from '../http/replies.js';
import { cacheControl, etagOf, evaluatePreconditions, httpDate, ifRangeHolds } from './conditional.js';
import { contentType } from './content-type.js';
import { acceptedVariants, type Variant } from './encoding.js';
import { parseRange } from './range.js';
import { StaticRoot, checkStaticPath, closeFd, type OpenedFile } from './resolve.js';

export interface StaticMount {
  /** Starts and ends with "/", e.g. "/static/". */
  readonly prefix: string;
  readonly dir: string;
}

export interface StaticFilesOptions {
  readonly mounts: readonly StaticMount[];
  /** Cache-Control max-age of names without a content hash; 0 = no-cache. */
  readonly maxAgeS: number;
  /** Regular expression (source) for content-hashed paths (under the mount); null = none. */
  readonly hashedNames: string | null;
  /** Called once per response with its status (metrics). */
  readonly onResponse?: (status: number) => void;
  readonly logger: Logger;
}

const READ_CHUNK = 64 * 1024;

export class StaticFiles {
  private readonly mounts: readonly { readonly prefix: string; readonly root: StaticRoot }[];
  private readonly hashed: RegExp | null;

  constructor(private readonly o: StaticFilesOptions) {
    // Longest prefix first, so a nested mount (/static/admin/) wins over its parent (/static/).
    this.mounts = [...o.mounts].sort((a, b) => b.prefix.length - a.prefix.length).map((m) => ({ prefix: m.prefix, root: new StaticRoot(m.dir) }));
    this.hashed = o.hashedNames === null ? null : new RegExp(o.hashedNames);
  }

  /** Whether a request URL is under a mount. On every request: prefix checks only, no allocation. */
  owns(url: string): boolean {
    for (let i = 0; i < this.mounts.length; i++) if (url.startsWith(this.mounts[i]!.prefix)) return true;
    return false;
  }

  handle(req: IncomingMessage, res: ServerResponse): void {
    this.serve(req, res).catch((err: NodeJS.ErrnoException) => {
      this.o.logger.error({ err: err.message, code: err.code, url: req.url }, 'static file failed');
      if (!res.headersSent && !res.destroyed) this.plain(res, 500, 'internal error\n');
      else res.destroy();
    });
  }

  private async serve(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = req.url ?? '/';
    const mount = this.mounts.find((m) => url.startsWith(m.prefix));
    if (!mount) return this.plain(res, 404, 'not found\n');
    if (req.method !== 'GET' && req.method !== 'HEAD') return this.plain(res, 405, 'method not allowed\n', { Allow: 'GET, HEAD' });
    const q = url.indexOf('?');
    const path = checkStaticPath(url.slice(mount.prefix.length, q < 0 ? undefined : q));
    if (!path.ok) return this.plain(res, path.status, path.status === 400 ? 'bad request\n' : 'not found\n');

    const identity = await mount.root.open(path.relative);
    if (!identity) return this.plain(res, 404, 'not found\n');
    // Whatever fd is held here is closed on every way out, unless a stream took it over.
    let held: number | null = identity.fd;
    try {
      let file: OpenedFile = identity;
      let variant: Variant | null = null;
      for (const v of acceptedVariants(req.headers['accept-encoding'])) {
        const alt = await mount.root.open(path.relative, v.suffix);
        if (!alt) continue;
        closeFd(identity.fd);
        held = alt.fd;
        file = alt;
        variant = v;
        break;
      }

      const etag = etagOf(file.size, file.mtimeMs, variant?.tag ?? null);
      const headers: OutgoingHttpHeaders = {
        'Cache-Control': cacheControl(this.hashed?.test(path.relative) ?? false, this.o.maxAgeS),
        ETag: etag,
        'Last-Modified': httpDate(file.mtimeMs),
        // Always: whether a variant exists is only looked up for clients that accept one.
        Vary: 'Accept-Encoding',
      };
      const h = req.headers;
      const pre = evaluatePreconditions(
        { ifMatch: h['if-match'], ifUnmodifiedSince: h['if-unmodified-since'], ifNoneMatch: h['if-none-match'], ifModifiedSince: h['if-modified-since'] },
        etag,
        file.mtimeMs,
      );
      if (pre === 412) return this.plain(res, 412, 'precondition failed\n');
      if (pre === 304) return this.send(res, 304, headers);

      headers['Content-Type'] = contentType(path.relative);
      headers['X-Content-Type-Options'] = 'nosniff';
      headers['Accept-Ranges'] = 'bytes';
      if (variant) headers['Content-Encoding'] = variant.coding;
      let status = 200;
      let start = 0;
      let end = file.size - 1;
      // Range is defined for GET only; a failed If-Range means "send the whole new version".
      if (req.method === 'GET' && h.range !== undefined && ifRangeHolds(single(h['if-range']), etag, file.mtimeMs)) {
        const range = parseRange(h.range, file.size);
        if (range.kind === 'unsatisfiable') return this.plain(res, 416, 'range not satisfiable\n', { 'Content-Range': `bytes */${file.size}`, 'Accept-Ranges': 'bytes' });
        if (range.kind === 'partial') {
          status = 206;
          ({ start, end } = range);
          headers['Content-Range'] = `bytes ${start}-${end}/${file.size}`;
        }
      }
      const length = Math.max(0, end - start + 1);
      headers['Content-Length'] = length;
      if (req.method === 'HEAD' || length === 0) return this.send(res, status, headers);

      this.send(res, status, headers, false);
      const fd = held;
      held = null;
      this.stream(fd, start, end, res, req.url);
    } finally {
      if (held !== null) closeFd(held);
    }
  }

  /**
   * The body, from the open fd (closed by the stream however it ends). A client that goes away
   * destroys the stream. A file that shrinks while being sent ends the stream early, and Node
   * then cuts the connection instead of leaving the client waiting for the missing bytes (tested).
   */
  private stream(fd: number, start: number, end: number, res: ServerResponse, url: string | undefined): void {
    const file = createReadStream('', { fd, start, end, autoClose: true, highWaterMark: READ_CHUNK });
    pipeline(file, res, (err) => {
      if (!err) return;
      // A client that left is routine; anything else is worth a line.
      const gone = (err as NodeJS.ErrnoException).code === 'ERR_STREAM_PREMATURE_CLOSE';
      this.o.logger[gone ? 'debug' : 'warn']({ err: err.message, url }, 'static file response cut');
    });
  }

  private send(res: ServerResponse, status: number, headers: OutgoingHttpHeaders, end = true): void {
    this.o.onResponse?.(status);
    res.writeHead(status, headers);
    if (end) res.end();
  }

  private plain(res: ServerResponse, status: number, body: string, extra: Record<string, string> = {}): void {
    const r = plainResponse(status, body, extra);
    this.o.onResponse?.(status);
    res.writeHead(status, r.headers);
    res.end(r.body);
  }
}

function single(v: string | string[] | undefined): string | undefined {
  return typeof v === 'string' ? v : undefined;
}
