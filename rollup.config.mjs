// One ESM build for Node and browsers, from tsc's output in build/tsc: first the self-contained compute
// worker (build/worker/worker_main.js, comlink bundled in), then dist/index.js, the library, with that
// worker embedded as a string (see embedWorker) and the kernels embedded as base64. No second file to
// locate at run time, so any bundler (Vite, esbuild, webpack) or an unbundled page works as is. Node
// built-ins stay external, imported behind `isNode` checks where bundlers do not look (hideNodeImports).
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { sep } from 'node:path';

const require = createRequire(import.meta.url);
const WORKER_BUNDLE = 'build/worker/worker_main.js';

/** Resolves the two comlink entry points from node_modules (the only runtime dependency). */
const comlink = {
  name: 'resolve-comlink',
  resolveId(id) {
    if (id === 'comlink') return require.resolve('comlink/dist/esm/comlink.mjs');
    if (id === 'comlink/dist/esm/node-adapter.mjs') return require.resolve('comlink/dist/esm/node-adapter.mjs');
    return null;
  },
};

/**
 * Replaces src/runtime/worker_url.ts (which points at the worker file beside it when run from source)
 * with a module that starts the bundled worker from its text: a `blob:` URL in browsers (same origin,
 * so it shares the engine's memory under cross-origin isolation), a `data:` URL in Node (loaded as ESM).
 * The marker comment lets the browser test serve a copy whose worker fails to load.
 */
const embedWorker = {
  name: 'embed-worker',
  load(id) {
    if (!id.endsWith(`${sep}runtime${sep}worker_url.js`)) return null;
    const source = readFileSync(WORKER_BUNDLE, 'utf8').replace(/\n\/\/# sourceMappingURL=.*\s*$/, '\n');
    return `const source = /* groupdnn:worker_main.js */ ${JSON.stringify(source)};
let url;
export function workerScriptUrl() {
  if (url === undefined) {
    const isNode = typeof globalThis.process?.versions?.node === 'string';
    url = isNode
      ? new URL('data:text/javascript,' + encodeURIComponent(source))
      : URL.createObjectURL(new Blob([source], { type: 'text/javascript' }));
  }
  return url;
}
`;
  },
};

/**
 * Node built-ins are imported only behind `isNode` checks, but bundlers resolve every literal
 * `import('node:os')` for the browser too (esbuild and webpack then fail the build). Rendered as
 * `import(((s) => s)('node:os'))` with webpack's and Vite's skip comments, no bundler looks at them;
 * Node still loads them.
 */
const hideNodeImports = {
  name: 'hide-node-imports',
  renderDynamicImport({ targetModuleId }) {
    if (!targetModuleId?.startsWith('node:')) return null;
    return { left: 'import(/* webpackIgnore: true */ /* @vite-ignore */ ((s) => s)(', right: '))' };
  },
};

const external = (id) => id.startsWith('node:');
const onwarn = (w, warn) => { if (w.code !== 'CIRCULAR_DEPENDENCY') warn(w); };

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

// Rollup builds the configurations in order: the worker exists before index.js embeds it.
export default [
  { external, onwarn, plugins: [comlink, hideNodeImports], input: 'build/tsc/runtime/worker_main.js', output: { file: WORKER_BUNDLE, format: 'es', inlineDynamicImports: true } },
  { external, onwarn, plugins: [comlink, embedWorker, hideNodeImports], input: 'build/tsc/index.js', output: { file: 'dist/index.js', format: 'es', inlineDynamicImports: true, sourcemap: true } },
  {
    input: 'build/tsc-benchdnn/bench/benchdnn/cli.js',
    external: (id) => id.startsWith('node:') || id === LIBRARY,
    onwarn,
    plugins: [benchdnnLibrary, hideNodeImports],
    output: { file: 'dist/benchdnn.js', format: 'es', banner: '#!/usr/bin/env node', paths: { [LIBRARY]: './index.js' } },
  },
];
