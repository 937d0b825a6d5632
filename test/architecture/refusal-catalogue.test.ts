// One catalogue of the data plane's own answers (src/http/refusals.ts): the fronts, the head
// checks, the pipeline, the paths and the forwarding core write no answer text of their own, so a
// refusal reads the same on every front and is changed in one place. The check looks for string
// literals that end in "\n" (every plain-text answer body does) in those folders.
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { CLIENT_REFUSALS, clientRefusal, refusalText } from '../../src/http/refusals.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
const FOLDERS = ['src/server', 'src/pipeline', 'src/proxy', 'src/forward', 'src/http'];
// The catalogue itself, and the health answers (roomgate's own, not refusals: "ok", "ready").
const OWNERS = new Set(['src/http/refusals.ts', 'src/http/health-answer.ts']);

/** Lines of `text` holding an answer body written in place: a quoted literal ending in \n (not \r\n). */
export function answerTexts(text: string): string[] {
  return text
    .split('\n')
    .filter((line) => !/^\s*(\/\/|\*)/.test(line))
    .filter((line) => /(['`])[A-Za-z"][^'`]*(?<!\\r)\\n\1/.test(line));
}

describe('the refusal catalogue', () => {
  it('is the only place the data plane writes answer text', () => {
    const found: string[] = [];
    for (const folder of FOLDERS) {
      for (const name of readdirSync(path.join(ROOT, folder))) {
        const file = `${folder}/${name}`;
        if (!name.endsWith('.ts') || OWNERS.has(file)) continue;
        for (const line of answerTexts(readFileSync(path.join(ROOT, file), 'utf8'))) found.push(`${file}: ${line.trim()}`);
      }
    }
    expect(found).toEqual([]);
  });

  it('finds an answer written in place', () => {
    expect(answerTexts("    return refuse(400, 'more than one Host header\\n');")).toHaveLength(1);
    expect(answerTexts('    socket.end(rawResponse(408, `request timeout\\n`));')).toHaveLength(1);
    expect(answerTexts("    text += `Connection: close\\r\\n`;")).toHaveLength(0);
  });

  it('every client refusal is one line with its status; the limit is filled in', () => {
    for (const code of Object.keys(CLIENT_REFUSALS) as (keyof typeof CLIENT_REFUSALS)[]) {
      const r = clientRefusal(code, 7);
      expect(r.body).toMatch(/^[^\n]+\n$/);
      expect(r.body).not.toContain('{limit}');
      expect(r.status).toBeGreaterThanOrEqual(400);
    }
    expect(clientRefusal('too-many-header-lines', 100).body).toBe('more than 100 request header lines\n');
    expect(refusalText('connect', { Allow: 'GET' })).toMatch(/^HTTP\/1\.1 405 Method Not Allowed\r\n[\s\S]*Allow: GET\r\n[\s\S]*Connection: close\r\n\r\nCONNECT is not supported\n$/);
  });
});
