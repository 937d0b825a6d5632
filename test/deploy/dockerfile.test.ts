// The Dockerfile and .dockerignore, checked as text (no Docker engine on the dev machine): node 24
// base, multi-stage with production dependencies only at run time, non-root, HEALTHCHECK on
// roomgate's own /healthz, exec-form ENTRYPOINT/CMD (SIGTERM reaches node), and a build context
// that holds everything the build copies. Each check is a function returning problems, and each
// is also run on a broken copy, so the test is seen to fail when the file is wrong.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { spawnSync } from 'node:child_process';
import { configSchema } from '../../src/config/schema.js';
import { NODE_FLAGS } from '../../src/node-flags.js';
import { dockerStages, dockerignoreExcludes, execForm, parseDockerfile, readText, ROOT, type Stage } from '../support/deploy-files.js';

const DOCKERFILE = readText('Dockerfile');
const DOCKERIGNORE = readText('.dockerignore');
const PKG = JSON.parse(readText('package.json')) as { files: string[]; scripts: Record<string, string> };
const LOCK = JSON.parse(readText('package-lock.json')) as { packages: Record<string, { dev?: boolean; hasInstallScript?: boolean }> };
const DEFAULT_PORT = configSchema.parse({}).listen.port;

/** Every rule the image must keep; [] when the Dockerfile is right. */
function dockerfileProblems(text: string): string[] {
  const problems: string[] = [];
  const instructions = parseDockerfile(text);
  const stages = dockerStages(instructions);
  const final = stages.at(-1);
  if (!final) return ['no FROM'];
  const stageNames = new Set(stages.map((s) => s.name).filter(Boolean));

  // Base images: the current Node LTS (24) everywhere.
  for (const s of stages) {
    if (stageNames.has(s.from)) continue;
    if (!/^node:24(?:[.-]|$)/.test(s.from)) problems.push(`FROM ${s.from}: expected a node:24 image`);
  }
  if (stages.length < 2) problems.push('not multi-stage: expected a build stage and a runtime stage');

  const runs = (s: Stage): string[] => s.instructions.filter((i) => i.cmd === 'RUN').map((i) => i.args);
  // The build stage compiles TypeScript with the dev dependencies.
  const builds = stages.slice(0, -1).some((s) => runs(s).some((r) => /\bnpm ci\b/.test(r) && !/--omit=dev/.test(r)) && runs(s).some((r) => /\btsc\b|npm run build/.test(r)));
  if (!builds) problems.push('no build stage running `npm ci` (with dev dependencies) and tsc');
  // The runtime stage: production dependencies only, never a compiler, never the build's node_modules.
  const finalRuns = runs(final);
  if (!finalRuns.some((r) => /\bnpm ci\b[^&;]*--omit=dev/.test(r))) problems.push('runtime stage: no `npm ci --omit=dev`');
  if (finalRuns.some((r) => /\bnpm (?:ci|install|i)\b(?![^&;]*--omit=dev)/.test(r))) problems.push('runtime stage installs dependencies without --omit=dev');
  if (finalRuns.some((r) => /\btsc\b|npm run build/.test(r))) problems.push('runtime stage compiles TypeScript (dev dependencies)');
  for (const c of final.instructions.filter((i) => i.cmd === 'COPY')) {
    if (/node_modules/.test(c.args)) problems.push(`runtime stage copies node_modules (${c.args}): dev dependencies would come along`);
  }
  // The native relay: built (strictly: a failed build fails the image) in a stage of its own, the
  // addon copied into the runtime stage, where no compiler is installed.
  const buildsRelay = stages.slice(0, -1).some((st) => runs(st).some((r) => /build-native\.mjs\b[^&;]*--strict/.test(r)));
  if (!buildsRelay) problems.push('no stage building the native relay (node scripts/build-native.mjs --strict)');
  if (!final.instructions.some((i) => i.cmd === 'COPY' && /--from=\S+/.test(i.args) && /roomgate_relay\.node/.test(i.args))) problems.push('runtime stage: the native relay (roomgate_relay.node) is not copied in');
  if (finalRuns.some((r) => /\b(g\+\+|gcc|build-essential|make)\b/.test(r) && /apt-get install/.test(r))) problems.push('runtime stage installs a compiler');

  // Non-root.
  const user = final.instructions.filter((i) => i.cmd === 'USER').at(-1)?.args;
  if (!user) problems.push('runtime stage: no USER (the container would run as root)');
  else if (/^(root|0)(:|$)/.test(user)) problems.push(`USER ${user}: root`);

  // HEALTHCHECK: exec form, roomgate's own /healthz on the public port, with node (no curl in the image).
  const hc = final.instructions.find((i) => i.cmd === 'HEALTHCHECK');
  if (!hc) problems.push('runtime stage: no HEALTHCHECK');
  else {
    const m = /^((?:--\S+\s+)*)CMD\s+(.*)$/s.exec(hc.args);
    const argv = m ? execForm(m[2]!) : undefined;
    if (!argv) problems.push('HEALTHCHECK: expected exec form CMD ["node", ...]');
    else {
      if (argv[0] !== 'node') problems.push(`HEALTHCHECK runs ${argv[0]}: only node is sure to be in the image`);
      if (!argv.join(' ').includes('/healthz')) problems.push('HEALTHCHECK does not hit /healthz');
      if (!argv.join(' ').includes(String(DEFAULT_PORT))) problems.push(`HEALTHCHECK does not default to the public port ${DEFAULT_PORT}`);
    }
    const timeout = /--timeout=(\d+)s/.exec(m?.[1] ?? '');
    if (!timeout || Number(timeout[1]) < 5) problems.push('HEALTHCHECK: expected --timeout=5s or more');
  }

  // Exec form, so SIGTERM goes to node itself (no /bin/sh -c in between).
  const entry = final.instructions.filter((i) => i.cmd === 'ENTRYPOINT').at(-1);
  const cmd = final.instructions.filter((i) => i.cmd === 'CMD').at(-1);
  if (!entry) problems.push('no ENTRYPOINT');
  for (const ins of [entry, cmd]) if (ins && !execForm(ins.args)) problems.push(`${ins.cmd} ${ins.args}: shell form; SIGTERM would go to /bin/sh, not node`);
  const argv = [...(entry ? (execForm(entry.args) ?? []) : []), ...(cmd ? (execForm(cmd.args) ?? []) : [])];
  if (argv[0] !== 'node' && argv[0] !== 'tini' && argv[0] !== '/usr/bin/tini') problems.push(`the container runs ${argv[0]}, not node (or tini)`);
  const script = argv.find((a) => a.endsWith('.js'));
  if (script !== 'dist/src/main.js') problems.push(`entry script ${script}: expected dist/src/main.js`);
  if (!argv.includes('start')) problems.push('the default command is not `start`');

  // Config from a mounted file and the environment.
  const env = final.instructions.filter((i) => i.cmd === 'ENV').map((i) => i.args).join(' ');
  if (!/ROOMGATE_CONFIG=\/etc\/roomgate\/roomgate\.yaml/.test(env)) problems.push('ENV ROOMGATE_CONFIG=/etc/roomgate/roomgate.yaml missing');
  // The V8 flags roomgate is measured with (src/node-flags.ts) reach the gateway and its workers.
  const nodeOptions = /NODE_OPTIONS=("[^"]*"|\S*)/.exec(env)?.[1]?.replace(/"/g, '').split(/\s+/) ?? [];
  for (const flag of NODE_FLAGS) if (!nodeOptions.includes(flag)) problems.push(`ENV NODE_OPTIONS lacks ${flag} (src/node-flags.ts)`);
  if (!final.instructions.some((i) => i.cmd === 'EXPOSE' && i.args.split(/\s+/).includes(String(DEFAULT_PORT)))) problems.push(`EXPOSE ${DEFAULT_PORT} missing`);
  return problems;
}

/** Every COPY from the build context must survive .dockerignore. */
function contextProblems(dockerfile: string, dockerignore: string): string[] {
  const problems: string[] = [];
  for (const ins of parseDockerfile(dockerfile)) {
    if (ins.cmd !== 'COPY' || /--from=/.test(ins.args)) continue;
    const parts = ins.args.split(/\s+/).filter((p) => !p.startsWith('--'));
    for (const src of parts.slice(0, -1)) {
      if (!existsSync(join(ROOT, src))) problems.push(`COPY ${src}: not in the repository`);
      if (dockerignoreExcludes(dockerignore, src.replace(/\/$/, ''))) problems.push(`COPY ${src}: excluded by .dockerignore`);
    }
  }
  // The runtime image gets what `npm pack` ships: package.json "files" must hold the entry points.
  for (const entry of ['dist/src/main.js', 'dist/examples/demo-backend/server.js', 'config/roomgate.example.yaml']) {
    if (!PKG.files.some((f) => entry === f || entry.startsWith(`${f.replace(/\/$/, '')}/`))) problems.push(`package.json "files" does not ship ${entry}`);
  }
  for (const heavy of ['node_modules', 'dist', '.git', 'test', 'bench']) {
    if (!dockerignoreExcludes(dockerignore, heavy)) problems.push(`.dockerignore lets ${heavy} into the build context`);
  }
  return problems;
}

describe('Dockerfile', () => {
  it('keeps every rule (node 24, multi-stage, --omit=dev, non-root, HEALTHCHECK, exec form)', () => {
    expect(dockerfileProblems(DOCKERFILE)).toEqual([]);
  });

  it('has a build context with everything the build copies, and nothing heavy', () => {
    expect(contextProblems(DOCKERFILE, DOCKERIGNORE)).toEqual([]);
    // The sources the entry points are built from exist.
    for (const src of ['src/main.ts', 'examples/demo-backend/server.ts', 'config/roomgate.example.yaml']) expect(existsSync(join(ROOT, src)), src).toBe(true);
  });

  it('ships a default config that is valid (no backends: the demo)', () => {
    const defaults = configSchema.safeParse(parseYaml(readText('config/roomgate.example.yaml')));
    expect(defaults.success).toBe(true);
  });

  it('has no production dependency with an install script (the runtime stage runs npm ci --ignore-scripts, no compiler)', () => {
    const scripted = Object.entries(LOCK.packages)
      .filter(([path, p]) => path !== '' && !p.dev && p.hasInstallScript)
      .map(([path]) => path);
    expect(scripted).toEqual([]);
  });

  it('runs the gateway with the node flags of src/node-flags.ts everywhere, and node accepts them', () => {
    const start = PKG.scripts.start?.split(/\s+/) ?? [];
    for (const flag of NODE_FLAGS) expect(start.slice(0, start.indexOf('dist/src/main.js'))).toContain(flag);
    // A renamed or removed V8 flag makes node refuse to start ("bad option"): caught here, not in production.
    const r = spawnSync(process.execPath, [...NODE_FLAGS, '-e', 'process.exit(0)'], { encoding: 'utf8', timeout: 10_000 });
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
  });

  const broken: [string, (s: string) => string, RegExp][] = [
    ['an old base image', (s) => s.replace(/node:24-bookworm-slim AS runtime/, 'node:20-bookworm-slim AS runtime'), /expected a node:24 image/],
    ['no USER', (s) => s.replace(/^USER .*$/m, ''), /no USER/],
    ['USER root', (s) => s.replace(/^USER .*$/m, 'USER root'), /root/],
    ['shell-form CMD', (s) => s.replace(/^CMD .*$/m, 'CMD node dist/src/main.js start'), /shell form/],
    ['shell-form ENTRYPOINT', (s) => s.replace(/^ENTRYPOINT .*$/m, 'ENTRYPOINT node dist/src/main.js'), /shell form/],
    ['no HEALTHCHECK', (s) => s.replace(/^HEALTHCHECK[\s\S]*?\n(?=ENTRYPOINT)/m, ''), /no HEALTHCHECK/],
    ['no NODE_OPTIONS', (s) => s.replace(/^ {4}NODE_OPTIONS=.*\n/m, ''), /NODE_OPTIONS lacks --max-semi-space-size/],
    ['dev dependencies at run time', (s) => s.replace('npm ci --omit=dev', 'npm ci'), /--omit=dev/],
    ['a single stage', (s) => s.replace(/^FROM node:24-bookworm-slim AS (?:runtime|native)$/gm, '').replace(/^COPY --from=.*$/gm, ''), /multi-stage|build stage/],
    ['no native relay in the image', (s) => s.replace(/^COPY --from=native.*$/m, ''), /native relay/],
    ['a native relay build that may fail', (s) => s.replace('build-native.mjs --strict', 'build-native.mjs'), /native relay/],
  ];
  it.each(broken)('fails on a Dockerfile with %s', (_name, breakIt, problem) => {
    const text = breakIt(DOCKERFILE);
    expect(text).not.toBe(DOCKERFILE);
    expect(dockerfileProblems(text).join('\n')).toMatch(problem);
  });

  it('fails when .dockerignore drops a source directory the build copies', () => {
    expect(contextProblems(DOCKERFILE, `${DOCKERIGNORE}\nsrc/\n`).join('\n')).toMatch(/COPY src: excluded/);
    expect(contextProblems(DOCKERFILE, '').join('\n')).toMatch(/lets node_modules into the build context/);
  });
});
