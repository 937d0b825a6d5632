// The rules a request head must pass before anything routes it, applied once at the public
// listener to what Node's parser accepted. Node's parser (llhttp, strict mode) already refuses
// bad framing syntax, bare CR/LF, obs-fold, control bytes and conflicting Content-Length; these
// are the rules it leaves to the server (RFC 9112 3.2, 6.1, 7; RFC 9110 7.2), and the
// canonical form every later step reads: an origin-form target in the one form of src/http/target.ts
// (reserved paths refused there) and exactly one Host.
import type { IncomingMessage } from 'node:http';
import { clientRefusal, type ClientRefusalCode } from './refusals.js';
import { isHostValue } from './syntax.js';
import type { TargetRule } from './target.js';

export interface HeadLimits {
  /** More header lines than this: 431 (Node would silently drop those past its own limit). */
  readonly maxHeaders: number;
  /** The canonical form of the target and the reserved paths (src/http/target.ts). */
  readonly target: TargetRule;
}

/** roomgate's own answer to a request head it will not route. */
export interface HeadRefusal {
  readonly status: 400 | 404 | 405 | 431 | 505;
  readonly body: string;
  readonly headers?: Record<string, string>;
}

export type HeadVerdict = { readonly ok: true; readonly asterisk: boolean } | { readonly ok: false; readonly refusal: HeadRefusal };

const OK: HeadVerdict = { ok: true, asterisk: false };
const OK_ASTERISK: HeadVerdict = { ok: true, asterisk: true };

function refuse(code: ClientRefusalCode, limit?: number): HeadVerdict {
  return { ok: false, refusal: clientRefusal(code, limit) as HeadRefusal };
}

/**
 * Checks a request head and brings it to canonical form in place: an absolute-form target
 * (`GET http://host/path`) becomes origin-form (`/path`) with its authority as the one Host
 * (RFC 9112 3.2.2: the target's authority wins over a Host header). Everything downstream
 * (health answers, roomgate's own paths, static mounts, room keys, forwarding) then sees the
 * same target and Host the backend will see.
 */
export function checkRequestHead(req: IncomingMessage, limits: HeadLimits): HeadVerdict {
  if (req.httpVersionMajor !== 1 || (req.httpVersionMinor !== 0 && req.httpVersionMinor !== 1)) {
    return refuse('http-version');
  }
  const raw = req.rawHeaders;
  if (raw.length > limits.maxHeaders * 2) {
    return refuse('too-many-header-lines', limits.maxHeaders);
  }
  let hosts = 0;
  let hostIndex = -1;
  let te: string | null = null;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i] as string;
    // Only names of 4 or 17 letters can matter here: skip the rest without lower-casing them.
    if (name.length === 4 && name.toLowerCase() === 'host') {
      hosts++;
      hostIndex = i + 1;
    } else if (name.length === 17 && name.toLowerCase() === 'transfer-encoding') {
      te = te === null ? (raw[i + 1] as string) : `${te},${raw[i + 1] as string}`;
    }
  }
  // A body is framed by exactly "chunked" or by Content-Length; any other coding list (which
  // Node lets through for some spellings) is refused, as RFC 9112 6.3 asks of a server.
  if (te !== null && te.trim().toLowerCase() !== 'chunked') {
    return refuse('transfer-encoding');
  }
  if (hosts > 1) return refuse('host-twice');

  const url = req.url ?? '';
  if (url.charCodeAt(0) !== 0x2f /* '/' */) {
    if (url === '*') {
      return req.method === 'OPTIONS' ? OK_ASTERISK : refuse('asterisk-not-options');
    }
    // The authority ends at the first '/' or '?': userinfo (`http://u@host/`) never matches, and
    // RFC 9110 4.2.4 asks a recipient to treat it as an error.
    const abs = /^(https?):\/\/([^/?#@]+)((?:[/?][^#]*)?)$/i.exec(url);
    if (!abs) return refuse('target-not-path-or-url');
    const authority = abs[2] as string;
    if (!isHostValue(authority)) return refuse('target-host-invalid');
    const rest = abs[3] as string;
    const target = limits.target(rest === '' ? '/' : rest.charCodeAt(0) === 0x3f /* '?' */ ? `/${rest}` : rest);
    if (!target.ok) return { ok: false, refusal: { status: target.status, body: target.body } };
    req.url = target.url;
    if (hostIndex === -1) raw.push('Host', authority);
    else raw[hostIndex] = authority;
    req.headers.host = authority;
    return OK;
  }
  if (hosts === 0) return refuse('host-missing');
  if (!isHostValue(raw[hostIndex] as string)) return refuse('host-invalid');
  return canonicalize(req, limits.target);
}

/** Brings an origin-form target to its canonical form in place, or refuses it (src/http/target.ts). */
export function canonicalize(req: { url?: string | undefined }, rule: TargetRule): HeadVerdict {
  const target = rule(req.url ?? '/');
  if (!target.ok) return { ok: false, refusal: { status: target.status, body: target.body } };
  req.url = target.url;
  return OK;
}
