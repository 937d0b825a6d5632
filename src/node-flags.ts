// The Node.js flags roomgate is meant to run with, in one place: `npm start`, the container image
// (NODE_OPTIONS) and the benchmark suite use them, and a test keeps those three in step.
//
// --max-semi-space-size=4: V8's young generation otherwise grows to 16 MB semi-spaces under a
// steady stream of frames, all of it counted in the RSS (about 40 MB with 3,000 busy sockets,
// half the memory per socket). Capped at 4 MB, scavenges run more often but stay short; the
// suite measured 9.2-9.6 KB per busy socket instead of 22.4-22.6 and no CPU per frame lost
// (docs/performance.md). V8 reads it only when the process starts: it cannot be set from code.
export const NODE_FLAGS: readonly string[] = ['--max-semi-space-size=4'];
