// This backend's own keys (docs/node-kit.md, "Settings"): the text `roomgate backend-key ID` prints,
// one per call secret while the secrets rotate. A key's whole text is the HMAC key; the call
// secrets themselves never reach a backend. Read from the environment (ROOMGATE_BACKEND_KEYS) or a
// file (ROOMGATE_BACKEND_KEYS_FILE, a mounted secret), so a rotation is a new file read again.
import { readFileSync } from 'node:fs';
import { keyProblem } from '../http/call-proof.js';

/** A configured key that is not one `roomgate backend-key ID` prints; names its place, never its text. */
export class KeyFormatError extends Error {
  override readonly name = 'KeyFormatError';
}

/** The keys in `text` (commas or new lines between them); KeyFormatError naming the bad one's place. */
export function parseKeys(text: string, origin = 'ROOMGATE_BACKEND_KEYS'): string[] {
  const keys = text
    .split(/[,\n]/)
    .map((k) => k.trim())
    .filter(Boolean);
  keys.forEach((key, i) => {
    const problem = keyProblem(key);
    // Never the key's text in the error: it is a secret, and the log is not.
    if (problem !== null) throw new KeyFormatError(`${origin}: key ${i + 1} of ${keys.length} is not a backend key: ${problem}`);
  });
  return keys;
}

/** The keys of ROOMGATE_BACKEND_KEYS_FILE (read now) or else ROOMGATE_BACKEND_KEYS; [] when neither is set. */
export function keysFromEnv(env: NodeJS.ProcessEnv = process.env): string[] {
  const file = env.ROOMGATE_BACKEND_KEYS_FILE;
  if (file) return parseKeys(readFileSync(file, 'utf8'), file);
  return parseKeys(env.ROOMGATE_BACKEND_KEYS ?? '');
}
