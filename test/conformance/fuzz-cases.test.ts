// The fuzzer's own cases (test/conformance/fuzz.ts, generateCase): the client and the backend write
// them as latin1, one byte per character, and the referee reads the same characters back: a
// character above U+00FF would go out as another byte than the referee expects, and the run would
// report a smuggled request roomgate never made. Case 951 of seed 20261208 did (a case mutation
// upper-cased 'ÿ' to U+0178, written as 'x').
import { describe, expect, it } from 'vitest';
import { generateCase } from './fuzz.js';

describe("the fuzzer's cases", () => {
  it('are one latin1 byte per character, requests and answers, over thousands of cases of two seeds', () => {
    const wide: string[] = [];
    for (const seed of [20261208, 1]) {
      for (let i = 0; i < 3_000; i++) {
        const c = generateCase(seed, i);
        const text = c.parts.join('') + (typeof c.answer === 'string' ? c.answer : '');
        if ([...text].some((ch) => (ch.codePointAt(0) as number) > 0xff)) wide.push(`seed ${seed} case ${i}`);
      }
    }
    expect(wide).toEqual([]);
  });
});
