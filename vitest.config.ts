import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 60_000,
    pool: 'forks',
    // The json report gives .ci/run its one-line summary.
    reporters: ['default', 'json'],
    outputFile: { json: 'build/vitest-report.json' },
    // test/lifetime.test.ts checks the FinalizationRegistry fallback after forced collections.
    poolOptions: { forks: { execArgv: ['--expose-gc'] } },
  },
});
