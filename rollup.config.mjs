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

/**
 * The benchdnn driver (bench/benchdnn, issue 17) as dist/benchdnn.js, the package's `groupdnn-benchdnn`
 * bin: compiled by `tsc -p tsconfig.benchdnn.json` into build/tsc-benchdnn; its imports of the library
 * (src/index.js) stay external and point at ./index.js beside it, so the bin runs the installed build.
 */
const LIBRARY = 'groupdnn:index';
const benchdnnLibrary = {
  name: 'benchdnn-library-external',
  resolveId(id, importer) {
    if (importer && /(^|\/)src\/index\.js$/.test(id)) return { id: LIBRARY, external: true };
    return null;
  },
};

export default [
  { ...common, input: 'build/tsc/index.js', output: { file: 'dist/index.js', format: 'es', inlineDynamicImports: true, sourcemap: true } },
  { ...common, input: 'build/tsc/runtime/worker_main.js', output: { file: 'dist/worker_main.js', format: 'es', inlineDynamicImports: true, sourcemap: true } },
  {
    input: 'build/tsc-benchdnn/bench/benchdnn/cli.js',
    external: (id) => id.startsWith('node:') || id === LIBRARY,
    plugins: [benchdnnLibrary],
    output: { file: 'dist/benchdnn.js', format: 'es', banner: '#!/usr/bin/env node', paths: { [LIBRARY]: './index.js' } },
  },
];
