import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

export default defineConfig({
  // Examples import the package by name (tsconfig.json "paths" for tsc and tsx): the sources here.
  resolve: { alias: { groupdnn: fileURLToPath(new URL('./src/index.ts', import.meta.url)) } },
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
