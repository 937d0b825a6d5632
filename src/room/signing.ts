/**
 * Signed room-affinity cookie values.
 *
 * Three wire formats behind one interface:
 *  - 'roomgate'      `{room}.{ts36}.{sig}`  — our own, salt mixed into the MAC'd message.
 *  - 'django-signer' `{room}:{sig}`         — django.core.signing.Signer(salt=S).sign(room).
 *  - 'django-cookie' `{room}:{ts62}:{sig}`  — HttpResponse.set_signed_cookie(name, room, salt=S).
 * The Django formats let roomgate and a Django app share one cookie (either side may issue it).
 * They were checked against Django 3.2 (django/core/signing.py, django/http/response.py) and are
 * cross-checked live by test/room/signing.test.ts.
 *
 * Security notes:
 *  - Every signature check compares the *encoded* signature strings with timingSafeEqual. Comparing
 *    the canonical base64url text (as Django does) rather than decoded bytes means the non-canonical
 *    encodings of one MAC (different trailing bits in the last char) are not accepted as well.
 *  - Secrets rotate: the first secret signs, every secret verifies.
 *  - `verify` never throws: hostile input only ever yields { ok: false }.
 */
import { createHmac, createSecretKey, timingSafeEqual } from 'node:crypto';
import type { KeyObject } from 'node:crypto';
import type { LoadedConfig } from '../config/load.js';
import { sha256 } from '../http/digest.js';

export type CookieFormat = 'roomgate' | 'django-signer' | 'django-cookie';

export interface SigningOptions {
  secrets: readonly string[];
  format: CookieFormat;
  cookieName: string;
  salt: string;
  maxAgeS: number;
}

export type VerifyResult =
  | { ok: true; room: string }
  | { ok: false; reason: 'malformed' | 'bad-signature' | 'expired' };

export interface RoomSigner {
  sign(room: string, nowMs: number): string;
  verify(value: string, nowMs: number): VerifyResult;
}

/** Browsers cap a cookie at ~4 KB anyway; anything longer is rejected before any crypto work. */
export const MAX_VALUE_LENGTH = 4096;

/**
 * roomgate format only: a timestamp more than this far ahead of our clock is rejected as
 * 'bad-signature' (after the MAC has been checked). A validly signed token from the future means
 * a peer with a badly skewed clock or a leaked secret; either way honouring it would stretch the
 * token's lifetime beyond maxAgeS. The Django formats mirror Django, which has no such check.
 */
export const MAX_FUTURE_SKEW_S = 60;

const MALFORMED: VerifyResult = { ok: false, reason: 'malformed' };
const BAD_SIGNATURE: VerifyResult = { ok: false, reason: 'bad-signature' };
const EXPIRED: VerifyResult = { ok: false, reason: 'expired' };

const BASE36_TS = /^[0-9a-z]{1,10}$/; // 10 base-36 digits stay below 2^53
const BASE62_TS = /^[0-9A-Za-z]{1,8}$/; // 8 base-62 digits stay below 2^53
const BASE62_ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

export function createRoomSigner(opts: SigningOptions): RoomSigner {
  const { secrets, format } = opts;
  if (!Array.isArray(secrets) || secrets.length === 0) {
    throw new Error('createRoomSigner: secrets must be a non-empty list (the first one signs)');
  }
  if (secrets.some((s) => typeof s !== 'string' || s.length === 0)) {
    throw new Error('createRoomSigner: secrets must not contain an empty string');
  }
  if (!Number.isFinite(opts.maxAgeS) || opts.maxAgeS < 0) {
    throw new Error(`createRoomSigner: maxAgeS must be a number >= 0, got ${opts.maxAgeS}`);
  }
  switch (format) {
    case 'roomgate':
      return roomgateSigner(opts, `roomgate.v1|${opts.salt}|`);
    case 'django-signer':
      // Signer(salt=S): `salt or 'django.core.signing.Signer'`, key = SECRET_KEY.
      return djangoSigner(opts, djangoKeys(secrets, '', opts.salt || 'django.core.signing.Signer'), false);
    case 'django-cookie': {
      // set_signed_cookie -> get_cookie_signer(salt=name + S) -> TimestampSigner with
      // key b'django.http.cookies' + SECRET_KEY and `salt or 'django.core.signing.TimestampSigner'`.
      const salt = opts.cookieName + opts.salt || 'django.core.signing.TimestampSigner';
      return djangoSigner(opts, djangoKeys(secrets, 'django.http.cookies', salt), true);
    }
    default:
      throw new Error(`createRoomSigner: unknown cookie format ${JSON.stringify(format)}`);
  }
}

// ---------------------------------------------------------------------------------------------
// roomgate format

/** `prefix` is MAC'd before every payload: it keeps the values of one purpose (cookie, pin) from verifying as another's. */
function roomgateSigner(opts: Pick<SigningOptions, 'secrets' | 'maxAgeS'>, prefix: string): RoomSigner {
  const keys = opts.secrets.map((s) => createSecretKey(Buffer.from(s, 'utf8')));
  const mac = (key: KeyObject, payload: string): string =>
    createHmac('sha256', key).update(prefix + payload, 'utf8').digest('base64url');

  return {
    sign(room, nowMs) {
      checkSignArgs(room, nowMs);
      const payload = `${room}.${Math.floor(nowMs / 1000).toString(36)}`;
      return `${payload}.${mac(keys[0]!, payload)}`;
    },
    verify(value, nowMs) {
      try {
        if (typeof value !== 'string' || value.length > MAX_VALUE_LENGTH) return MALFORMED;
        // Split from the right: room keys may themselves contain '.' (and ':').
        const sigDot = value.lastIndexOf('.');
        if (sigDot < 0) return MALFORMED;
        const tsDot = value.lastIndexOf('.', sigDot - 1);
        if (tsDot <= 0) return MALFORMED; // no ts separator, or empty room
        const ts = value.slice(tsDot + 1, sigDot);
        if (!BASE36_TS.test(ts)) return MALFORMED;

        const payload = value.slice(0, sigDot);
        const sig = value.slice(sigDot + 1);
        if (!keys.some((k) => safeEqual(sig, mac(k, payload)))) return BAD_SIGNATURE;

        const ageS = nowMs / 1000 - parseInt(ts, 36);
        if (ageS < -MAX_FUTURE_SKEW_S) return BAD_SIGNATURE;
        if (opts.maxAgeS > 0 && ageS > opts.maxAgeS) return EXPIRED;
        return { ok: true, room: value.slice(0, tsDot) };
      } catch {
        return MALFORMED; // belt and braces: the contract is "never throws"
      }
    },
  };
}

/** What a pin's MAC covers before `room.ts`; the Python kit (roomgate_kit.pins) signs with the same. */
export const PIN_PURPOSE = 'roomgate.pin.v1|';

/**
 * The signer of per-tab room pins (docs/per-tab-rooms.md): `room.ts.sig` as the roomgate cookie
 * format, keyed with the cookie's secrets whatever the cookie's format, under its own purpose
 * (`roomgate.pin.v1|`), so a pin never verifies as a cookie nor a cookie as a pin. Django never
 * MACs with the bare SECRET_KEY as the key (salted_hmac hashes it with a salt first), so a pin
 * keyed with it is no value the app accepts either.
 */
export function createPinSigner(secrets: readonly string[], maxAgeS: number): RoomSigner {
  if (secrets.length === 0 || secrets.some((s) => typeof s !== 'string' || s.length === 0)) {
    throw new Error('createPinSigner: secrets must be a non-empty list of non-empty strings (the first one signs)');
  }
  if (!Number.isFinite(maxAgeS) || maxAgeS < 0) throw new Error(`createPinSigner: maxAgeS must be a number >= 0, got ${maxAgeS}`);
  return roomgateSigner({ secrets, maxAgeS }, PIN_PURPOSE);
}


// ---------------------------------------------------------------------------------------------
// Django formats

/**
 * Django's salted_hmac(key_salt=salt + 'signer', value, secret, 'sha256'): the HMAC key is
 * sha256(key_salt + secret).digest(). Precomputed once per secret.
 */
function djangoKeys(secrets: readonly string[], secretPrefix: string, salt: string): KeyObject[] {
  return secrets.map((s) =>
    createSecretKey(sha256(`${salt}signer${secretPrefix}${s}`)),
  );
}

function djangoSigner(opts: SigningOptions, keys: KeyObject[], timestamped: boolean): RoomSigner {
  const mac = (key: KeyObject, payload: string): string =>
    createHmac('sha256', key).update(payload, 'utf8').digest('base64url');

  return {
    sign(room, nowMs) {
      checkSignArgs(room, nowMs);
      const payload = timestamped ? `${room}:${encodeBase62(Math.floor(nowMs / 1000))}` : room;
      return `${payload}:${mac(keys[0]!, payload)}`;
    },
    verify(value, nowMs) {
      try {
        if (typeof value !== 'string' || value.length > MAX_VALUE_LENGTH) return MALFORMED;
        // Django rsplits on ':' (twice for TimestampSigner), so rooms may contain ':'.
        const sigColon = value.lastIndexOf(':');
        if (sigColon <= 0) return MALFORMED;
        let roomEnd = sigColon;
        let ts = '';
        if (timestamped) {
          roomEnd = value.lastIndexOf(':', sigColon - 1);
          if (roomEnd <= 0) return MALFORMED;
          ts = value.slice(roomEnd + 1, sigColon);
          if (!BASE62_TS.test(ts)) return MALFORMED;
        }

        const payload = value.slice(0, sigColon);
        const sig = value.slice(sigColon + 1);
        if (!keys.some((k) => safeEqual(sig, mac(k, payload)))) return BAD_SIGNATURE;

        // Like get_signed_cookie(max_age=M): expired when time.time() - ts > M. Django does not
        // reject future timestamps, and neither do we here, so both sides agree on every value.
        if (timestamped && opts.maxAgeS > 0 && nowMs / 1000 - decodeBase62(ts) > opts.maxAgeS) {
          return EXPIRED;
        }
        return { ok: true, room: value.slice(0, roomEnd) };
      } catch {
        return MALFORMED;
      }
    },
  };
}

// ---------------------------------------------------------------------------------------------
// helpers

function checkSignArgs(room: string, nowMs: number): void {
  // Programming errors, not hostile input: an empty room would never verify, and a bad clock
  // value would produce a timestamp no verifier can parse.
  if (typeof room !== 'string' || room.length === 0) {
    throw new Error('RoomSigner.sign: room must be a non-empty string');
  }
  if (!Number.isFinite(nowMs) || nowMs < 0) {
    throw new Error(`RoomSigner.sign: nowMs must be a finite number >= 0, got ${nowMs}`);
  }
}

/**
 * Constant-time string comparison. On a length mismatch we still run a comparison of the same
 * cost (expected against itself) so the timing does not say how far a guess got; the length of a
 * signature is public anyway (always 43 chars of base64url for SHA-256).
 */
function safeEqual(given: string, expected: string): boolean {
  const a = Buffer.from(given, 'utf8');
  const b = Buffer.from(expected, 'utf8');
  if (a.length !== b.length) {
    timingSafeEqual(b, b);
    return false;
  }
  return timingSafeEqual(a, b);
}

/** django.utils.baseconv.base62.encode for non-negative integers. */
function encodeBase62(n: number): string {
  if (n === 0) return '0';
  let out = '';
  while (n > 0) {
    out = BASE62_ALPHABET[n % 62] + out;
    n = Math.floor(n / 62);
  }
  return out;
}

/** Caller has already checked the string against BASE62_TS. */
function decodeBase62(s: string): number {
  let n = 0;
  for (const ch of s) n = n * 62 + BASE62_ALPHABET.indexOf(ch);
  return n;
}

/** The cookie signer for a configuration; null when the cookie is a plain room key. */
export function signerFor(config: LoadedConfig, secrets: readonly string[]): RoomSigner | null {
  if (!config.cookie.signed) return null;
  return createRoomSigner({
    secrets,
    format: config.cookie.format,
    cookieName: config.cookie.name,
    salt: config.cookie.salt,
    maxAgeS: config.cookie.maxAgeS,
  });
}
