// One ESM build for Node and browsers: dist/index.js (the library, comlink bundled in) and
// dist/worker_main.js (the self-contained compute worker, found at run time next to index.js through
// `new URL('./worker_main.js', import.meta.url)`), from tsc's output in build/tsc. The kernels are
// embedded (base64) in index.js: no .wasm file to locate. Node built-ins stay external; they are only
// imported behind `isNode` checks.
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
/** Resolves the two comlink entry points from node_modules (the only runtime dependency). */
const comlink = {
  name: 'resolve-comlink',
  resolveId(id) {
    if (id === 'comlink') return require.resolve('comlink/dist/esm/comlink.mjs');
    if (id === 'comlink/dist/esm/node-adapter.mjs') return require.resolve('comlink/dist/esm/node-adapter.mjs');
    return null;
  },
};
const external = (id) => id.startsWith('node:');
const common = { external, plugins: [comlink], onwarn(w, warn) { if (w.code !== 'CIRCULAR_DEPENDENCY') warn(w); } };

export default [
  { ...common, input: 'build/tsc/index.js', output: { file: 'dist/index.js', format: 'es', inlineDynamicImports: true, sourcemap: true } },
  { ...common, input: 'build/tsc/runtime/worker_main.js', output: { file: 'dist/worker_main.js', format: 'es', inlineDynamicImports: true, sourcemap: true } },
];
