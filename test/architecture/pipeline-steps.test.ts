// The request pipeline's steps have one caller: the room key is read, the method rule applied and
// the page cache asked in src/pipeline/pipeline.ts and nowhere else in src/, so no front and no
// transport can take a request past one of them (or take one twice) on its own.
import { describe, expect, it } from 'vitest';
import { sourceFiles } from '../support/source-files.js';

const OWNER = 'src/pipeline/pipeline.ts';

/** A call of each step, as written on the parts the pipeline is given. */
const STEPS: Record<string, RegExp> = {
  'room key': /\.\s*keyFor\s*\(/,
  'method rule': /\bmethods\s*\??\.\s*verdict\s*\(/,
  'page cache': /\bcache\s*\??\.\s*handle\s*\(/,
};

/** "step: file" for each file of `files` that calls a step. */
export function stepCallers(files: readonly { name: string; text: string }[]): string[] {
  return files.flatMap((f) => Object.entries(STEPS).filter(([, re]) => re.test(f.text)).map(([step]) => `${step}: ${f.name}`));
}

describe('the pipeline steps', () => {
  it('are called from the pipeline only', () => {
    const files = sourceFiles('src');
    const callers = stepCallers(files);
    expect(callers.filter((c) => !c.endsWith(`: ${OWNER}`))).toEqual([]);
    expect(callers).toEqual(Object.keys(STEPS).map((step) => `${step}: ${OWNER}`));
  });

  it('a front or a transport that takes a step itself is found', () => {
    const files = [
      { name: 'src/proxy/lean-pages.ts', text: 'const key = this.o.router\n  .keyFor(r, now);\n' },
      { name: 'src/server/h2-front.ts', text: "if (o.methods?.verdict(req.method) !== 'forward') return;\n" },
      { name: 'src/proxy/http-proxy.ts', text: 'this.o.cache.handle(request, writer, pass);\n' },
    ];
    expect(stepCallers(files)).toEqual(['room key: src/proxy/lean-pages.ts', 'method rule: src/server/h2-front.ts', 'page cache: src/proxy/http-proxy.ts']);
  });
});
