// podman and podman-compose as child processes, each with a timeout; container state, health and
// logs. Health checks are run by the check itself (`podman healthcheck run`): without systemd
// nothing runs them on their interval.
import { spawn } from 'node:child_process';
import { within } from './report.mjs';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** podman prints an error per container when systemd is absent (no timers); not ours to report. */
function dropNoise(text) {
  return text
    .split('\n')
    .filter((l) => !/systemd|healthcheck timer/.test(l))
    .join('\n');
}

/** Runs a command; never rejects: {code, stdout, stderr}, code 124 on timeout. */
export function run(cmd, args, { timeoutMs = 60_000, nice = false, unboxed = false } = {}) {
  const argv = nice ? ['nice', ['-n', '10', cmd, ...args]] : [cmd, args];
  return new Promise((resolve) => {
    const child = spawn(argv[0], argv[1], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    // Teardown (unboxed) gets its own time even when the box is used up: the file's `down` is checked too.
    const timer = setTimeout(() => child.kill('SIGKILL'), Math.max(1, unboxed ? timeoutMs : within(timeoutMs)));
    child.on('error', (err) => {
      clearTimeout(timer);
      resolve({ code: 127, stdout, stderr: String(err) });
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code: signal === 'SIGKILL' ? 124 : (code ?? 1), stdout: stdout.trim(), stderr: dropNoise(stderr).trim() });
    });
  });
}

export const podman = (args, opts) => run('podman', args, opts);

export async function state(container) {
  const r = await podman(['inspect', '--format', '{{json .State}}', container], { timeoutMs: 15_000 });
  if (r.code !== 0) return undefined;
  try {
    return JSON.parse(r.stdout);
  } catch {
    return undefined;
  }
}

export async function logs(container, lines = 15) {
  const r = await podman(['logs', '--tail', String(lines), container], { timeoutMs: 10_000 });
  return `${r.stdout}\n${r.stderr}`.trim();
}

/**
 * Runs the container's healthcheck until it passes. Fails early when the container has exited
 * (a command that does not start: the image and the file disagree).
 */
export async function waitHealthy(container, timeoutMs) {
  const until = Date.now() + within(timeoutMs);
  const t0 = Date.now();
  let last = 'no attempt';
  while (Date.now() < until) {
    const s = await state(container);
    if (!s) return { ok: false, why: 'no such container' };
    if (s.Status === 'exited' || s.Status === 'stopped') return { ok: false, why: `exited with code ${s.ExitCode}` };
    if (s.Running) {
      const r = await podman(['healthcheck', 'run', container], { timeoutMs: 15_000 });
      if (r.code === 0) return { ok: true, ms: Date.now() - t0 };
      last = `${r.stdout} ${r.stderr}`.trim() || `exit ${r.code}`;
    }
    await sleep(1_000);
  }
  return { ok: false, why: `not healthy in ${Math.round((Date.now() - t0) / 1000)} s (last: ${last})` };
}

/** Waits for a one-shot container to exit; its exit code. */
export async function waitExited(container, timeoutMs) {
  const until = Date.now() + within(timeoutMs);
  while (Date.now() < until) {
    const s = await state(container);
    if (!s) return { ok: false, why: 'no such container' };
    if (!s.Running && (s.Status === 'exited' || s.Status === 'stopped')) return { ok: s.ExitCode === 0, code: s.ExitCode, why: `exit code ${s.ExitCode}` };
    await sleep(500);
  }
  return { ok: false, why: `still running after ${Math.round(within(timeoutMs) / 1000)} s` };
}

export async function waitRunning(container, timeoutMs) {
  const until = Date.now() + within(timeoutMs);
  while (Date.now() < until) {
    const s = await state(container);
    if (s?.Running) return { ok: true };
    if (s && s.Status === 'exited') return { ok: false, why: `exited with code ${s.ExitCode}` };
    await sleep(500);
  }
  return { ok: false, why: 'not running' };
}

/** Names of the containers matching a filter (compose project label, pod); a failed query is reported as one. */
export async function containersWith(filter) {
  const r = await podman(['ps', '-a', '--filter', filter, '--format', '{{.Names}}'], { timeoutMs: 15_000, unboxed: true });
  if (r.code !== 0) return [`(podman ps failed, exit ${r.code}: ${r.stderr})`];
  return r.stdout.split('\n').filter(Boolean);
}
