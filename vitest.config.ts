import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 60_000,
    pool: 'forks',
    // test/lifetime.test.ts checks the FinalizationRegistry fallback after forced collections.
    poolOptions: { forks: { execArgv: ['--expose-gc'] } },
  },
});
