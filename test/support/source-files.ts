// The project's own TypeScript sources, read for the architecture checks (test/architecture/):
// each file of a folder and its subfolders, by its path from the repository's root.
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

export const ROOT = path.resolve(import.meta.dirname, '../..');

export interface SourceFile {
  /** From the repository's root, with forward slashes: "src/proxy/router.ts". */
  readonly name: string;
  readonly text: string;
}

/** Every .ts file under `dir` (relative to the root), with its text. */
export function sourceFiles(dir: string): SourceFile[] {
  const walk = (rel: string): string[] =>
    readdirSync(path.join(ROOT, rel), { withFileTypes: true }).flatMap((e) => {
      const child = `${rel}/${e.name}`;
      return e.isDirectory() ? walk(child) : e.name.endsWith('.ts') ? [child] : [];
    });
  return walk(dir).map((name) => ({ name, text: readFileSync(path.join(ROOT, name), 'utf8') }));
}
