/**
 * Seeded randomized cross-check of Proposal #3 (`grouped_gemm`) and Proposal #2 (matmul with the grouped-offsets
 * attribute) on the cpu and gpu engines against the tests' float64 expectation (cases and checks in
 * grouped_gemm_fuzz_cases.ts).
 *
 *   npx tsx bench/grouped_gemm_fuzz.ts --seed=1 --count=20 [--only=cpu|gpu] [--case=7] [--kind=P3|P2|P3dq|P2dq|bad-P3|bad-P2] [--size=small] [--threads=2 (cpu engine)]
 *
 * Prints one line per case and a summary; a failing case prints its full JSON description (rerun it alone with
 * --seed=S --case=i). Exit status 1 when any case mismatches or errors.
 */
import { register } from 'node:module';

// The test runners the cases reuse import `expect` from vitest, which works only inside its runner: outside it,
// 'vitest' resolves to a small expect of the matchers they use.
register('./vitest_shim_hooks.mjs', import.meta.url);
const { describeCase, generateCase, runCase } = await import('./grouped_gemm_fuzz_cases.js');
const { Engine } = await import('../src/index.js');
const { gpuEngine } = await import('../test/gpu_helpers.js');
type FuzzCase = import('./grouped_gemm_fuzz_cases.js').FuzzCase;
type Verdict = Awaited<ReturnType<typeof runCase>>;
type AnyEngine = Parameters<typeof runCase>[0];

const FAILING = new Set(['mismatch', 'error', 'nondeterministic']);

async function main(): Promise<void> {
  const arg = (name: string): string | undefined => process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
  const seed = Number(arg('seed') ?? 1), count = Number(arg('count') ?? 10);
  const only = arg('only'), caseIndex = arg('case'), kind = arg('kind') as FuzzCase['kind'] | undefined, size = arg('size') === 'small' ? 'small' : 'full';
  const engines: [string, AnyEngine][] = [];
  if (only !== 'gpu') engines.push(['cpu', await Engine.create({ threads: Number(arg('threads') ?? 1) })]);
  if (only !== 'cpu') engines.push(['gpu', await gpuEngine()]);
  const indices = caseIndex !== undefined ? [Number(caseIndex)] : Array.from({ length: count }, (_, i) => i);
  const tally = new Map<string, number>();
  const failures: string[] = [];
  const refusals: string[] = [];
  for (const i of indices) {
    const fc = generateCase(seed, i, kind, size);
    const verdicts: string[] = [];
    const byEngine: Record<string, Verdict> = {};
    for (const [name, eng] of engines) {
      const t0 = performance.now();
      const v = await runCase(eng, fc);
      const ms = performance.now() - t0;
      byEngine[name] = v;
      tally.set(`${name}:${v.status}`, (tally.get(`${name}:${v.status}`) ?? 0) + 1);
      verdicts.push(`${name}=${v.status}(${(ms / 1000).toFixed(1)}s)`);
      if (FAILING.has(v.status) && 'detail' in v) failures.push(`seed=${seed} case=${i} ${name} ${v.status}: ${v.detail}\n  ${describeCase(fc)}\n  ${JSON.stringify(fc)}`);
    }
    const cpuV = byEngine.cpu, gpuV = byEngine.gpu;
    if (cpuV?.status === 'ok' && gpuV?.status === 'refused') refusals.push(`seed=${seed} case=${i} gpu refuses what the cpu runs: ${gpuV.detail}\n  ${describeCase(fc)}`);
    const why = Object.entries(byEngine).filter(([, v]) => v.status !== 'ok').map(([n, v]) => `${n}: ${'detail' in v ? v.detail.slice(0, 200) : ''}`).join(' | ');
    console.log(`[${seed}:${i}] ${verdicts.join(' ')} ${describeCase(fc)}${why ? `\n    ${why}` : ''}`);
  }
  engines.forEach(([, e]) => e.release());
  console.log(`\nsummary seed=${seed} cases=${indices.length}: ${[...tally].map(([k, v]) => `${k}=${v}`).join(' ')}`);
  if (refusals.length) console.log(`\ncpu runs, gpu refuses (${refusals.length}):\n${refusals.join('\n')}`);
  if (failures.length) console.log(`\nFAILURES (${failures.length}):\n${failures.join('\n')}`);
  process.exitCode = failures.length ? 1 : 0;
}

await main();
