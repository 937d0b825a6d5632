// Writes dist/ for src/, examples/ and bench/ by transpiling each file on its own (TypeScript's
// transpileModule: types erased, nothing checked), as `tsc -p tsconfig.json` would emit it: the
// project compiles with verbatimModuleSyntax, so a file's output never depends on another file's
// types. `npm test`'s pretest runs it (about 2 s instead of the 20 s of a checking tsc pass) so the
// processes the tests spawn have their dist/; the type-check of every file, tests included, is a
// test of its own (test/typecheck.test.ts), run beside the others.
//   node scripts/transpile-dist.mjs
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const config = ts.getParsedCommandLineOfConfigFile(join(root, 'tsconfig.json'), {}, { ...ts.sys, onUnRecoverableConfigFileDiagnostic: (d) => { throw new Error(ts.flattenDiagnosticMessageText(d.messageText, '\n')); } });
if (!config) throw new Error('tsconfig.json could not be read');
// Every file is an ES module (package.json's "type": "module"), which is how NodeNext emits them;
// transpileModule, seeing no package.json, would take NodeNext to mean CommonJS.
const options = { ...config.options, noEmit: false, declaration: false, module: ts.ModuleKind.ESNext, moduleResolution: ts.ModuleResolutionKind.Bundler };
const outDir = options.outDir ?? join(root, 'dist');

let files = 0;
for (const source of config.fileNames) {
  if (source.endsWith('.d.ts')) continue; // declarations emit nothing
  const rel = relative(root, source);
  const out = join(outDir, rel.replace(/\.ts$/, '.js'));
  const result = ts.transpileModule(readFileSync(source, 'utf8'), { compilerOptions: options, fileName: source, reportDiagnostics: true });
  const errors = (result.diagnostics ?? []).filter((d) => d.category === ts.DiagnosticCategory.Error);
  if (errors.length > 0) {
    process.stderr.write(ts.formatDiagnostics(errors, { getCanonicalFileName: (f) => f, getCurrentDirectory: () => root, getNewLine: () => '\n' }));
    process.exit(1);
  }
  mkdirSync(dirname(out), { recursive: true });
  // transpileModule names the map after the file; the comment tsc writes is the same.
  writeFileSync(out, result.outputText);
  if (result.sourceMapText !== undefined) writeFileSync(`${out}.map`, result.sourceMapText);
  files++;
}
process.stdout.write(`transpiled ${files} files into ${relative(root, outDir)}/\n`);
