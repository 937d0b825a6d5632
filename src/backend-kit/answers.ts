// What the kit's endpoints answer, and how an answer is written on node:http. Errors are JSON
// ({"error": "..."}) and say what a caller needs, nothing internal.
import type { IncomingMessage, ServerResponse } from 'node:http';

export interface Answer {
  readonly status: number;
  readonly body?: Buffer;
  readonly type?: string;
  /** X-Roomgate-Sockets of a push's 204: how many sockets got the message. */
  readonly sockets?: number;
}

export const NO_CONTENT: Answer = { status: 204 };

export function error(status: number, text: string): Answer {
  return { status, body: Buffer.from(JSON.stringify({ error: text })), type: 'application/json' };
}

export function jsonAnswer(status: number, value: unknown): Answer {
  return { status, body: Buffer.from(JSON.stringify(value)), type: 'application/json' };
}

export function writeAnswer(res: ServerResponse, a: Answer): void {
  const headers: Record<string, string | number> = {};
  if (a.body !== undefined) Object.assign(headers, { 'Content-Type': a.type ?? 'application/json', 'Content-Length': a.body.length });
  if (a.sockets !== undefined) headers['X-Roomgate-Sockets'] = String(a.sockets);
  res.writeHead(a.status, headers);
  res.end(a.body);
}

/** The request's body; 'too-large' past `max` bytes (read to the end all the same: the answer can be sent); 'broken'. */
export function readBody(req: IncomingMessage, max: number): Promise<Buffer | 'too-large' | 'broken'> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size <= max) chunks.push(c);
    });
    req.on('end', () => resolve(size > max ? 'too-large' : Buffer.concat(chunks)));
    req.on('error', () => resolve('broken'));
  });
}
