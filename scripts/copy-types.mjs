// Copies tsc's declaration files (build/tsc/**/*.d.ts) to dist/types, the package's "types".
import { cpSync, readdirSync, statSync, mkdirSync } from 'node:fs';
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
