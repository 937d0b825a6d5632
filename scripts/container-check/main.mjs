// The container check (issue 28): roomgate's image built and every compose topology of deploy/
// run as containers, on podman. Run it through scripts/container-check.sh, which builds the local
// stand-in base images first and removes whatever this run started, even on failure.
//   node scripts/container-check/main.mjs [image,demo,tls,sidecar]
// Prints a PASS/FAIL line per assertion and the timings per topology; exits 1 on any FAIL.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { fail, failed, remainingMs, startTimeBox, summary } from './report.mjs';
import { buildImage, imageAlone } from './topology-image.mjs';
import { demo } from './topology-demo.mjs';
import { tls } from './topology-tls.mjs';
import { sidecar } from './topology-sidecar.mjs';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const ALL = { image: imageAlone, demo, tls, sidecar };
const only = (process.argv[2] ?? Object.keys(ALL).join(',')).split(',');
const unknown = only.filter((t) => !(t in ALL));
if (unknown.length) {
  console.error(`unknown topology ${unknown.join(', ')}; choose from ${Object.keys(ALL).join(', ')}`);
  process.exit(2);
}

const ctx = {
  root,
  run: process.env.ROOMGATE_CHECK_RUN || `rgcheck${process.pid}`,
  // Inside the shell script's state directory when run through it, which its trap removes even
  // when this process is killed.
  dir: mkdtempSync(join(process.env.ROOMGATE_CHECK_STATE || tmpdir(), 'roomgate-container-check-')),
};

try {
  if (await buildImage(root)) {
    startTimeBox();
    for (const name of only) {
      if (remainingMs() === 0) {
        fail(`${name}: not run, the time box is used up`);
        continue;
      }
      await ALL[name](ctx);
    }
  }
} catch (err) {
  fail('the check itself', err?.stack ?? String(err));
} finally {
  rmSync(ctx.dir, { recursive: true, force: true });
  summary();
}
process.exit(failed() ? 1 : 0);
