// Raw HTTP requests for the static-file tests: the path is sent exactly as given (fetch would
// normalize "../" away and decode br/gzip bodies), every request has a timeout, no keep-alive.
import { readdirSync, readlinkSync } from 'node:fs';
import http, { type IncomingHttpHeaders, type IncomingMessage } from 'node:http';

export interface RawResponse {
  status: number;
  headers: IncomingHttpHeaders;
  body: Buffer;
}

export function rawRequest(port: number, path: string, headers: Record<string, string> = {}, method = 'GET', timeoutMs = 10_000): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, path, method, headers, agent: false, timeout: timeoutMs }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }));
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error(`timed out after ${timeoutMs} ms: ${method} ${path}`)));
    req.on('error', reject);
    req.end();
  });
}

/** Starts a GET and resolves with the response once its head arrived; the body is left paused. */
export function openResponse(port: number, path: string, timeoutMs = 10_000): Promise<{ req: http.ClientRequest; res: IncomingMessage }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, path, agent: false, timeout: timeoutMs }, (res) => resolve({ req, res }));
    req.on('timeout', () => req.destroy(new Error(`timed out after ${timeoutMs} ms: GET ${path}`)));
    req.on('error', reject);
    req.end();
  });
}

/** Reads the rest of a response: its bytes and whether it ended cleanly or was cut. */
export function drain(res: IncomingMessage, timeoutMs = 10_000): Promise<{ bytes: number; complete: boolean }> {
  return new Promise((resolve, reject) => {
    let bytes = 0;
    const timer = setTimeout(() => reject(new Error(`timed out after ${timeoutMs} ms reading a body`)), timeoutMs);
    res.on('data', (c: Buffer) => (bytes += c.length));
    res.on('end', () => {
      clearTimeout(timer);
      resolve({ bytes, complete: res.complete });
    });
    res.on('error', () => {
      clearTimeout(timer);
      resolve({ bytes, complete: false });
    });
    res.on('close', () => {
      clearTimeout(timer);
      resolve({ bytes, complete: res.complete });
    });
    res.resume();
  });
}

/** Descriptors of process `pid` (self by default) open on files under dir (Linux /proc). */
export function fdsUnder(dir: string, pid: number | 'self' = 'self'): string[] {
  const out: string[] = [];
  let fds: string[];
  try {
    fds = readdirSync(`/proc/${pid}/fd`);
  } catch {
    return out;
  }
  for (const fd of fds) {
    try {
      const target = readlinkSync(`/proc/${pid}/fd/${fd}`);
      if (target.startsWith(dir)) out.push(target);
    } catch {
      // closed meanwhile
    }
  }
  return out;
}
