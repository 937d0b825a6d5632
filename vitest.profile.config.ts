// `npm run test:profile`: the whole suite as `npm test` runs it, with test/profile/setup.ts
// recording where the CPU goes (test-output/profile/files.txt and spawns.txt; sort -rn them).
import base from './vitest.config.js';

export default { ...base, test: { ...base.test, setupFiles: ['test/profile/setup.ts'] } };
