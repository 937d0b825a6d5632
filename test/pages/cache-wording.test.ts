// The page cache line of the status page in words a person reads: "2 stored pages, 2.5 KB of
// 64 MiB" (was "2 answers, 0.0 of 64.0 MiB"), and the restart note after a reload changed the
// cache settings; the page's own script (which redraws the line from the stream) says the same.
import { describe, expect, it } from 'vitest';
import { byteSize, CACHE_RESTART_NOTE, cacheSummary, STATUS_SCRIPT, type StatusCache } from '../../src/pages/status-page.js';

/** The page script's cacheText, taken out of STATUS_SCRIPT as it is shipped. */
function scriptCacheText(): (c: StatusCache | null, restartNeeded: boolean) => string {
  const from = STATUS_SCRIPT.indexOf('  function byteSize(');
  const to = STATUS_SCRIPT.indexOf('  function mode(');
  expect(from).toBeGreaterThan(0);
  expect(to).toBeGreaterThan(from);
  return new Function(`${STATUS_SCRIPT.slice(from, to)}\nreturn cacheText;`)() as (c: StatusCache | null, r: boolean) => string;
}

const cache = (objects: number, bytes: number, hitRatio: number | null = null): StatusCache => ({ objects, bytes, maxBytes: 64 * 1_048_576, hitRatio, hits: 9, answered: 10 });

describe('the cache line', () => {
  it('sizes in the unit a person reads', () => {
    expect([0, 1, 1023, 1024, 2560, 1_048_575, 1_048_576, 67_108_864, 1.5 * 1_073_741_824].map(byteSize)).toEqual([
      '0 bytes',
      '1 bytes',
      '1023 bytes',
      '1 KB',
      '2.5 KB',
      '1024 KB',
      '1 MiB',
      '64 MiB',
      '1.5 GiB',
    ]);
  });

  it('counts stored pages, and says when new settings wait for a restart', () => {
    expect(cacheSummary(cache(2, 2560))).toBe('no requests yet; 2 stored pages, 2.5 KB of 64 MiB');
    expect(cacheSummary(cache(1, 700, 0.9))).toBe('90.0 % hits (9 of 10); 1 stored page, 700 bytes of 64 MiB');
    expect(cacheSummary(cache(2, 2560), true)).toBe(`no requests yet; 2 stored pages, 2.5 KB of 64 MiB; ${CACHE_RESTART_NOTE}`);
    expect(cacheSummary(null)).toBe('off');
    expect(cacheSummary(null, true)).toBe(`off; ${CACHE_RESTART_NOTE}`);
  });

  it('the page script says the same as the server', () => {
    const cacheText = scriptCacheText();
    for (const c of [null, cache(0, 0), cache(1, 1023, 1), cache(2, 2560, 0.5), cache(42, 3 * 1_048_576 + 5, 0.123)]) {
      for (const restart of [false, true]) expect(cacheText(c, restart)).toBe(cacheSummary(c, restart));
    }
  });
});
