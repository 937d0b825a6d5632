// From the URL path under a static mount to an open file inside the mount's directory, safely.
// Two steps: a pure check of the decoded path (no "..", no encoded separators, no NUL, no
// dotfiles), then the file system: realpath must stay under the root (symlinks cannot escape),
// and only a regular file is opened. Nothing here reads a byte of content.
import { constants, close, fstat, open, realpathSync, type Stats } from 'node:fs';
import { realpath } from 'node:fs/promises';
import { join, sep } from 'node:path';

export type PathCheck =
  | { readonly ok: true; readonly relative: string }
  | { readonly ok: false; readonly status: 400 | 404; readonly reason: string };

// Encoded "/" and "\" would turn one URL segment into several path segments after decoding.
const ENCODED_SEPARATOR = /%(?:2f|5c)/i;
// C0 controls and DEL, NUL included: never part of a file name we serve.
const CONTROL = /[\u0000-\u001f\u007f]/;

/**
 * The URL path after the mount prefix (query already removed) as a relative file path, or why not.
 * 400: malformed or hostile (bad percent-encoding, encoded separators, backslash, control
 * characters, "." or ".." segments). 404: cannot name a servable file (empty segment, i.e. a
 * directory or "//"; a dotfile or a dot-directory).
 */
export function checkStaticPath(rest: string): PathCheck {
  if (rest.includes('\\') || ENCODED_SEPARATOR.test(rest)) return { ok: false, status: 400, reason: 'separator' };
  let decoded: string;
  try {
    decoded = decodeURIComponent(rest);
  } catch {
    return { ok: false, status: 400, reason: 'malformed encoding' };
  }
  if (CONTROL.test(decoded)) return { ok: false, status: 400, reason: 'control character' };
  // Decoded once only: "%252e%252e" is the literal name "%2e%2e", never "..".
  const segments = decoded.split('/');
  for (const s of segments) {
    if (s === '.' || s === '..') return { ok: false, status: 400, reason: 'dot segment' };
  }
  for (const s of segments) {
    if (s === '') return { ok: false, status: 404, reason: 'directory' };
    if (s.startsWith('.')) return { ok: false, status: 404, reason: 'dotfile' };
  }
  return { ok: true, relative: segments.join(sep) };
}

export interface OpenedFile {
  /** Open for reading; the caller closes it (or hands it to a stream that does). */
  readonly fd: number;
  readonly size: number;
  readonly mtimeMs: number;
}

const OPEN_FLAGS = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK;

/** One mount's directory. The root is resolved once (realpath) when the mount is created. */
export class StaticRoot {
  readonly root: string;
  private readonly inside: string;

  constructor(dir: string) {
    this.root = realpathSync(dir);
    this.inside = this.root.endsWith(sep) ? this.root : this.root + sep;
  }

  /**
   * The regular file at relative (+ suffix, e.g. ".br"), opened; null when it does not exist, is
   * not a regular file, or resolves (through symlinks) outside the root or to a dotfile. Errors
   * other than "not there / not allowed" (EMFILE, EIO) are thrown.
   */
  async open(relative: string, suffix = ''): Promise<OpenedFile | null> {
    let real: string;
    try {
      real = await realpath(join(this.root, relative + suffix));
    } catch (err) {
      if (isAbsent(err)) return null;
      throw err;
    }
    if (!this.contains(real)) return null;
    // O_NOFOLLOW: the real path has no symlink left, so one appearing now is refused;
    // O_NONBLOCK: a FIFO planted in the directory cannot hang a thread-pool thread on open.
    let fd: number;
    try {
      fd = await new Promise<number>((resolve, reject) => open(real, OPEN_FLAGS, (err, f) => (err ? reject(err) : resolve(f))));
    } catch (err) {
      if (isAbsent(err)) return null;
      throw err;
    }
    let st: Stats;
    try {
      st = await new Promise<Stats>((resolve, reject) => fstat(fd, (err, s) => (err ? reject(err) : resolve(s))));
    } catch (err) {
      await closeFdAsync(fd);
      throw err;
    }
    if (!st.isFile()) {
      await closeFdAsync(fd);
      return null;
    }
    return { fd, size: st.size, mtimeMs: st.mtimeMs };
  }

  /** Under the root, and no dot-named component on the way (a symlink may point at one). */
  private contains(real: string): boolean {
    if (!real.startsWith(this.inside)) return false;
    const rel = real.slice(this.inside.length);
    return rel !== '' && !rel.startsWith('.') && !rel.includes(`${sep}.`);
  }
}

/** Errors that mean "no such servable file" rather than a server problem. */
function isAbsent(err: unknown): boolean {
  const code = (err as NodeJS.ErrnoException).code;
  return code === 'ENOENT' || code === 'ENOTDIR' || code === 'ELOOP' || code === 'ENAMETOOLONG' || code === 'EACCES' || code === 'EPERM' || code === 'EISDIR';
}

/** Closes fd in the background (close errors are of no use to anyone here). */
export function closeFd(fd: number): void {
  close(fd, () => undefined);
}

function closeFdAsync(fd: number): Promise<void> {
  return new Promise((resolve) => close(fd, () => resolve()));
}
