// Passive health has one writer: the forwarding core (src/forward/forwarder.ts) is the only module
// that marks a backend down after a failed connection or up after a made one, so every path (pages,
// upgrades, cache fills) applies the same rule and the pool's events tell the Supervisor of each.
import { describe, expect, it } from 'vitest';
import { sourceFiles } from '../support/source-files.js';

const OWNER = 'src/forward/forwarder.ts';
// The pool defines the marks; the forwarding core calls them.
const ALLOWED = new Set([OWNER, 'src/runtime/pool.ts']);

/** Files of `files` that call a backend mark. */
export function markWriters(files: readonly { name: string; text: string }[]): string[] {
  return files.filter((f) => /\.\s*mark(Up|Down)\s*\(/.test(f.text)).map((f) => f.name);
}

describe('backend marks', () => {
  it('are written by the forwarding core only', () => {
    const files = sourceFiles('src');
    expect(markWriters(files).filter((f) => !ALLOWED.has(f))).toEqual([]);
    expect(markWriters(files)).toContain(OWNER);
  });

  it('a path that marks a backend itself is found', () => {
    const fixture = { name: 'src/proxy/lean-pages.ts', text: 'connected: () => o.pool.markUp(backend.id),\n' };
    const spaced = { name: 'src/cache/fill.ts', text: 'cx.pool\n  .markDown(backend.id, now, kind);\n' };
    expect(markWriters([fixture, spaced])).toEqual(['src/proxy/lean-pages.ts', 'src/cache/fill.ts']);
  });
});
