// The error an invalid configuration throws: every problem, one per line. Its own module, with no
// imports, so the CLI can tell it apart (src/cli/run.ts) without loading the schema.
export class ConfigError extends Error {
  constructor(readonly problems: readonly string[]) {
    // A problem of several lines (a YAML error with its line and caret) keeps its lines together.
    super(`invalid configuration:\n${problems.map((p) => `  - ${p.replace(/\n/g, '\n    ')}`).join('\n')}`);
    this.name = 'ConfigError';
  }
}
