import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/**', 'build/**', '.devrun/**', '.gl/**', 'node_modules/**', 'scratch/**', 'reports/**', 'wasm/**', 'src/runtime/wasm_embedded.ts'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ['**/*.ts'],
    rules: {
      '@typescript-eslint/no-explicit-any': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_' }],
    },
  },
  {
    // Browser pages (demo, browser tests) and Node scripts: their own globals.
    files: ['examples/browser/**/*.js', 'test/browser/**/*.js'],
    languageOptions: { globals: { window: 'readonly', document: 'readonly', navigator: 'readonly', performance: 'readonly', crossOriginIsolated: 'readonly', console: 'readonly' } },
  },
  {
    files: ['scripts/**/*.mjs', 'rollup.config.mjs'],
    languageOptions: { globals: { console: 'readonly', process: 'readonly', URL: 'readonly' } },
  },
  {
    files: ['**/*.js'],
    languageOptions: { globals: { TextEncoder: 'readonly', setTimeout: 'readonly', console: 'readonly', process: 'readonly', WebAssembly: 'readonly', Atomics: 'readonly', SharedArrayBuffer: 'readonly', Int32Array: 'readonly', self: 'readonly', URL: 'readonly' } },
  },
);
