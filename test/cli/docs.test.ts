// docs/cli.md documents every command and each of its options (as the CLI itself lists them, in
// `roomgate help --json`), the exit codes, and the README links to it.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT, runCli } from '../support/processes.js';

interface HelpJson {
  commands: { name: string; options: { name: string }[] }[];
}

const doc = readFileSync(join(ROOT, 'docs/cli.md'), 'utf8');

/** The "## ..." section whose heading names the command. */
function section(name: string): string | undefined {
  return doc.split(/\n(?=## )/).find((s) => {
    const heading = s.split('\n')[0] ?? '';
    return heading.startsWith('## ') && heading.slice(3).split(/,\s*/).includes(name);
  });
}

describe('docs/cli.md', () => {
  it('has a section per command naming each of its options, with an example', async () => {
    const help = JSON.parse((await runCli(['help', '--json'])).stdout) as HelpJson;
    expect(help.commands.length).toBeGreaterThanOrEqual(8);
    for (const c of help.commands) {
      const s = section(c.name);
      expect(s, `a "## ${c.name}" section`).toBeDefined();
      expect(s, c.name).toContain(`roomgate ${c.name}`);
      expect(s, `${c.name}: an example block`).toMatch(/```/);
      for (const o of c.options) if (o.name !== '--help') expect(s, `${c.name} ${o.name}`).toContain(o.name);
    }
  });

  it('says what each exit code means, and the README links to it', () => {
    for (const code of ['| 0 |', '| 1 |', '| 2 |']) expect(doc).toContain(code);
    expect(readFileSync(join(ROOT, 'README.md'), 'utf8')).toContain('](docs/cli.md)');
  });
});
