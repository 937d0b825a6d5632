// Strict-Transport-Security on every answer of the TLS port, HTTP/1.1 and h2 alike.
import type http from 'node:http';
import type http2 from 'node:http2';

const STS = 'strict-transport-security';

type ResponseClass = typeof http.ServerResponse | typeof http2.Http2ServerResponse;

/**
 * A response class that adds Strict-Transport-Security to every answer without one of its own
 * (a backend's wins), whoever writes it: the proxy (raw header list), the control plane, static
 * files, roomgate's own replies, or an implicit head. One place, so no answer path is missed.
 */
export function withHsts<T extends ResponseClass>(base: T, value: string): T {
  // The mixin needs a constructor type TypeScript can extend; both bases have the same writeHead.
  const Base = base as unknown as typeof http.ServerResponse;
  class HstsResponse extends Base {
    override writeHead(status: number, reason?: unknown, headers?: unknown): this {
      const named = typeof reason === 'string';
      let h = named ? headers : reason;
      if (!this.hasHeader(STS)) {
        if (Array.isArray(h)) {
          if (!h.some((x, i) => i % 2 === 0 && String(x).toLowerCase() === STS)) h = [...(h as string[]), 'Strict-Transport-Security', value];
        } else if (h !== null && typeof h === 'object') {
          if (!Object.keys(h).some((k) => k.toLowerCase() === STS)) h = { ...(h as Record<string, unknown>), 'Strict-Transport-Security': value };
        } else this.setHeader('Strict-Transport-Security', value);
      }
      const args = (named ? [status, reason, h] : [status, h]).filter((x) => x !== undefined);
      return (super.writeHead as (...a: unknown[]) => this)(...args);
    }
  }
  return HstsResponse as unknown as T;
}
