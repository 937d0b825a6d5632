// PASS/FAIL lines, per-topology timings and the check's time box. Every wait in the check asks
// `remainingMs()` so the run stays inside the budget however slow the machine is. The box starts
// once roomgate's image is built (`startTimeBox()`): the build has its own limit, since an
// uncached build on a fresh, busy machine takes longer than the topologies together.
const started = Date.now();
const BUILD_LIMIT_MS = 300_000;
const budgetMs = Number(process.env.ROOMGATE_CONTAINER_CHECK_BUDGET_S || 180) * 1000;
let boxStart;

export function startTimeBox() {
  boxStart = Date.now();
}
const failures = [];
const timings = [];

export function pass(what, detail) {
  console.log(`PASS ${what}${detail ? ` (${detail})` : ''}`);
}

export function fail(what, detail) {
  failures.push(what);
  console.log(`FAIL ${what}${detail ? `: ${detail}` : ''}`);
}

/** PASS or FAIL by `ok`; returns ok, so a caller can stop a topology on a failure it depends on. */
export function check(what, ok, detail, failDetail = detail) {
  if (ok) pass(what, detail);
  else fail(what, failDetail);
  return ok;
}

export function info(line) {
  console.log(`     ${line}`);
}

export function remainingMs() {
  if (boxStart === undefined) return Math.max(0, BUILD_LIMIT_MS - (Date.now() - started));
  return Math.max(0, budgetMs - (Date.now() - boxStart));
}

/** A wait of at most `ms`, cut to what is left of the time box. */
export function within(ms) {
  return Math.min(ms, remainingMs());
}

export function failed() {
  return failures.length;
}

export function seconds(ms) {
  return `${(ms / 1000).toFixed(1)} s`;
}

/** Times one phase of a topology for the summary. */
export async function timed(topology, phase, fn) {
  const t0 = Date.now();
  try {
    return await fn();
  } finally {
    timings.push({ topology, phase, ms: Date.now() - t0 });
  }
}

export function summary() {
  const byTopology = new Map();
  for (const t of timings) {
    const list = byTopology.get(t.topology) ?? [];
    list.push(t);
    byTopology.set(t.topology, list);
  }
  console.log('\ntimings:');
  for (const [topology, list] of byTopology) {
    const total = list.reduce((s, t) => s + t.ms, 0);
    console.log(`  ${topology.padEnd(8)} ${seconds(total).padStart(7)}  (${list.map((t) => `${t.phase} ${seconds(t.ms)}`).join(', ')})`);
  }
  const boxed = boxStart === undefined ? 'not started' : `${seconds(Date.now() - boxStart)} of ${seconds(budgetMs)}`;
  console.log(`  total    ${seconds(Date.now() - started).padStart(7)}  (after the build, in the time box: ${boxed})`);
  if (failures.length) console.log(`\n${failures.length} FAIL: ${failures.join('; ')}`);
  else console.log('\nall container checks passed');
}
