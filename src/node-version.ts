// The oldest Node.js roomgate runs on (package.json "engines"), checked before anything else is
// loaded: on an older Node some modules fail on import or misbehave quietly (on Node 20,
// `start --workers 2` opened no socket), so the CLI refuses with one line naming the command that
// gets a supported Node. This module imports nothing, so it runs on any Node.
export const MIN_NODE = '22.12.0';

function newEnough(version: string): boolean {
  const [major = 0, minor = 0] = version.replace(/^v/, '').split('.').map(Number);
  return major > 22 || (major === 22 && minor >= 12);
}

/**
 * The refusal for this Node (null when it is new enough): one line naming `. scripts/node24.sh`
 * as the user can type it from where they are (`script` is the path of that file).
 */
export function nodeRefusal(version: string, script: string, cwd: string): string | null {
  if (newEnough(version)) return null;
  const base = cwd.endsWith('/') ? cwd : `${cwd}/`;
  const shown = script.startsWith(base) ? script.slice(base.length) : script;
  return `roomgate: Node.js ${version} is too old (roomgate needs >= ${MIN_NODE}); get Node 24 in this shell with: . ${shown}`;
}
