/**
 * One onnxruntime-web measurement in its own process (ORT fixes its thread count per process):
 *   npx tsx bench/ort_peer_cli.ts --workload=moe-a --threads=2 --min-ms=1500
 * Prints one JSON row in the format of bench.ts.
 */
import { cpuUsage } from 'node:process';
import { createOrtPeer } from './ort_peer.js';
import { fillRandom, timeIt } from './timing.js';
import { WORKLOADS, usefulFlops } from './workloads.js';

const args = new Map(process.argv.slice(2).map((a) => {
  const [k, v] = a.replace(/^--/, '').split('=');
  return [k, v ?? 'true'] as const;
}));
const w = WORKLOADS[args.get('workload') ?? 'moe-a'];
if (!w) throw new Error(`unknown workload ${args.get('workload')}`);
const threads = Number(args.get('threads') ?? 1);
const minMs = Number(args.get('min-ms') ?? 1500);
const E = w.sizes.length, { K, N } = w;
const totalM = w.sizes.reduce((a, b) => a + b, 0);
const wf32 = new Float32Array(E * K * N);
fillRandom(wf32, 4, 0.05);
const x = new Float32Array(totalM * K);
fillRandom(x, 3);
const y = new Float32Array(totalM * N);
const ort = await createOrtPeer(wf32, E, K, N, threads);
const c0 = cpuUsage();
const w0 = performance.now();
const t = await timeIt(() => ort.run(x, w.sizes, y), { minMs });
const c1 = cpuUsage(c0);
const cpuPerWall = (c1.user + c1.system) / 1000 / (performance.now() - w0);
await ort.close();
console.log(JSON.stringify({
  workload: w.name, impl: 'onnxruntime-web:per-expert-matmul', dt: 'f32', threads,
  median_ms: t.median, min_ms: t.min, max_ms: t.max, gflops: usefulFlops(w) / t.median / 1e6,
  note: `cpu/wall=${cpuPerWall.toFixed(2)}`,
}));
