/**
 * One thread count of `npm run bench -- --mode=backward` in its own process, one JSON row per line:
 *   npx tsx bench/backward_cli.ts --workload=moe-b --threads=1 --isa=auto --rounds=5 --samples=3
 */
import { backwardRound, backwardWorkload } from './backward_bench.js';

const args = new Map(process.argv.slice(2).map((a) => {
  const [k, v] = a.replace(/^--/, '').split('=');
  return [k, v ?? 'true'] as const;
}));
const rows = await backwardRound(backwardWorkload(args.get('workload')), Number(args.get('threads') ?? 1), (args.get('isa') ?? 'auto') as 'auto' | 'simd128' | 'relaxed', Number(args.get('rounds') ?? 5), Number(args.get('samples') ?? 3));
for (const r of rows) console.log(JSON.stringify(r));
