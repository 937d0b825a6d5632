// SHA-256 of a UTF-8 string: token digests (auth.ts), CSP hashes (pages), Django signing keys.
import { createHash } from 'node:crypto';

export function sha256(text: string): Buffer {
  return createHash('sha256').update(text, 'utf8').digest();
}
