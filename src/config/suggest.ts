// "Did you mean ...?": the closest known word to a misspelt key or value.
import { oneOf } from './describe.js';

/** Edit distance with adjacent transpositions (optimal string alignment): "prot" -> "port" is 1. */
export function editDistance(a: string, b: string): number {
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) => Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)));
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const row = d[i] as number[];
      const up = d[i - 1] as number[];
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      row[j] = Math.min((up[j] as number) + 1, (row[j - 1] as number) + 1, (up[j - 1] as number) + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) row[j] = Math.min(row[j] as number, ((d[i - 2] as number[])[j - 2] as number) + 1);
    }
  }
  return (d[a.length] as number[])[b.length] as number;
}

// Case, "_" and "-" do not count: max_header_bytes and MaxHeaderBytes are maxHeaderBytes.
const norm = (s: string) => s.toLowerCase().replace(/[-_]/g, '');

/**
 * The known words a misspelt one most likely meant (several when they are equally close), or
 * none: same word but for case and separators, words it is the start of ("timeout" ->
 * "timeoutMs"), or those within about a third of its length in edits (words of 1-2 letters: none).
 */
export function closest(word: string, known: readonly string[]): string[] {
  const w = norm(word);
  const limit = w.length < 3 ? 0 : Math.max(1, Math.round(w.length / 3));
  const scored = known.map((k) => {
    const n = norm(k);
    return { k, score: n === w ? 0 : w.length >= 4 && n.startsWith(w) ? 0.5 : editDistance(w, n) };
  });
  const best = Math.min(...scored.map((x) => x.score));
  return w.length > 0 && best <= limit ? scored.filter((x) => x.score === best).map((x) => x.k) : [];
}

/** '; did you mean "port"?' for a misspelt word, or '' when no known word is close. */
export function didYouMean(word: string, known: readonly string[]): string {
  const near = closest(word, known).map((k) => `"${k}"`);
  return near.length === 0 ? '' : `did you mean ${oneOf(near)}?`;
}
