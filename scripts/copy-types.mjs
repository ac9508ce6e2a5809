// Copies tsc's declaration files (build/tsc/**/*.d.ts, `@internal` members already stripped) to
// dist/types, the package's "types", and adds dist/types/globals.d.ts, referenced from index.d.ts.
import { cpSync, readdirSync, readFileSync, statSync, mkdirSync, writeFileSync } from 'node:fs';
import { join, dirname } from 'node:path';

function walk(dir, out = []) {
  for (const f of readdirSync(dir)) {
    const p = join(dir, f);
    if (statSync(p).isDirectory()) walk(p, out);
    else if (p.endsWith('.d.ts')) out.push(p);
  }
  return out;
}
for (const f of walk('build/tsc')) {
  const to = join('dist/types', f.slice('build/tsc/'.length));
  mkdirSync(dirname(to), { recursive: true });
  cpSync(f, to);
}

// The declarations name WebAssembly.Memory / WebAssembly.Module, and the disposable symbols. A Node-only
// project (lib ES2022 + @types/node 20, no DOM) has no WebAssembly namespace, a DOM-only one on lib
// ES2022 no Symbol.dispose. Empty interfaces merge with the full ones wherever a lib declares them
// (lib.dom, lib.webworker, a later @types/node) and make the names exist where none does; the
// disposable part is @types/node's own compatibility declaration (compatibility/disposable.d.ts). The
// same holds for the WebGPU interfaces the gpu engine's declarations name.
writeFileSync('dist/types/globals.d.ts', `// Names the declarations use that some consumers' lib settings lack (scripts/copy-types.mjs says why).
export {};
declare global {
  namespace WebAssembly {
    interface Memory {}
    interface Module {}
  }
  // WebGPU objects of the gpu engine's API (a GPUDevice passed in, GpuMemory's GPUBuffers): their full
  // declarations come from @webgpu/types or lib.dom where a project has WebGPU; elsewhere the names
  // only need to exist.
  interface GPUDevice {}
  interface GPUBuffer {}
  interface GPUBindGroupEntry {}
  interface GPUBufferBinding {}
  interface GPUCommandEncoder {}
  interface SymbolConstructor {
    readonly dispose: unique symbol;
    readonly asyncDispose: unique symbol;
  }
  interface Disposable {
    [Symbol.dispose](): void;
  }
  interface AsyncDisposable {
    [Symbol.asyncDispose](): PromiseLike<void>;
  }
}
`);
const index = 'dist/types/index.d.ts';
writeFileSync(index, `/// <reference path="./globals.d.ts" />\n${readFileSync(index, 'utf8')}`);
