/**
 * Where the compute worker's script is. Run from source (tsx, vitest) it is the file beside this
 * module. The build (rollup.config.mjs) replaces this module with one that embeds the bundled worker
 * and starts it from a `blob:` URL (browsers) or a `data:` URL (Node): a bundled or copied
 * dist/index.js then has no second file to locate, whatever the bundler makes of
 * `new URL('./worker_main.js', import.meta.url)` (esbuild leaves it pointing beside the bundle).
 */
export function workerScriptUrl(): URL | string {
  return new URL('./worker_main.js', import.meta.url);
}
