import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Integration tests start real processes and bind real ports; keep them bounded.
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // 2 cores: more workers only thrash the machine and make timing-sensitive tests flaky.
    maxWorkers: 2,
    reporters: ['default'],
  },
});
