/**
 * Sanity check + mini benchmark for the onnxruntime-web peer (bench/ort_peer.ts).
 *
 *   cd /work/main && npx tsx bench/ort_peer_check.ts
 *
 * onnxruntime-web's thread count is fixed once per process (one wasm instance, global thread pool), so the
 * parent process spawns one child per thread count; each child checks correctness (both peer designs) on a tiny
 * case against a float64 loop, then times the larger case (median of 5 runs after 2 warm-ups) and reports the
 * CPU-time / wall-time ratio of the timed runs, which shows how many cores ORT actually kept busy.
 */
import { spawnSync } from 'node:child_process';
import { loadavg } from 'node:os';
import { createOrtPeer, ortEffectiveThreads, ortVersion } from './ort_peer.js';

const THREAD_COUNTS = [1, 2];
const WARMUP = 2;
const REPS = 5;

/** mulberry32: deterministic uniform [-0.5, 0.5). */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296 - 0.5;
  };
}

function randomF32(n: number, seed: number): Float32Array {
  const r = rng(seed);
  const a = new Float32Array(n);
  for (let i = 0; i < n; i++) a[i] = r();
  return a;
}

/** Max |y - ref| over the given rows (all rows if `rows` is omitted), ref computed in float64. */
function maxAbsError(
  x: Float32Array,
  w: Float32Array,
  sizes: readonly number[],
  K: number,
  N: number,
  y: Float32Array,
  rowFilter: (row: number) => boolean = () => true,
): number {
  let err = 0;
  let row = 0;
  for (let g = 0; g < sizes.length; g++) {
    const wBase = g * K * N;
    for (let r = 0; r < sizes[g]; r++, row++) {
      if (!rowFilter(row)) continue;
      for (let n = 0; n < N; n++) {
        let acc = 0;
        for (let k = 0; k < K; k++) acc += x[row * K + k] * w[wBase + k * N + n];
        err = Math.max(err, Math.abs(y[row * N + n] - acc));
      }
    }
  }
  return err;
}

function median(a: readonly number[]): number {
  const s = [...a].sort((p, q) => p - q);
  const mid = s.length >> 1;
  return s.length % 2 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
}

interface ChildResult {
  threads: number;
  effectiveThreads: number;
  ortVersion: string;
  smallErr: number;
  smallErrWeightsAsInput: number;
  largeSpotErr: number;
  createMs: number;
  timesMs: number[];
  medianMs: number;
  cpuOverWall: number;
}

async function child(threads: number): Promise<ChildResult> {
  // 1) Correctness, tiny case: E=4, K=33, N=17, sizes [5,0,9,1] (includes an empty expert).
  const sE = 4, sK = 33, sN = 17;
  const sSizes = [5, 0, 9, 1];
  const sM = sSizes.reduce((p, q) => p + q, 0);
  const sW = randomF32(sE * sK * sN, 1);
  const sX = randomF32(sM * sK, 2);
  const errs: number[] = [];
  for (const weightsAsInput of [false, true]) {
    const peer = await createOrtPeer(sW, sE, sK, sN, threads, { weightsAsInput });
    const sY = new Float32Array(sM * sN).fill(Number.NaN);
    await peer.run(sX, sSizes, sY);
    await peer.close();
    errs.push(maxAbsError(sX, sW, sSizes, sK, sN, sY));
  }

  // 2) Timing, larger case: E=8, K=1024, N=2816, 1024 tokens split unevenly (one expert empty).
  const E = 8, K = 1024, N = 2816;
  const sizes = [300, 12, 0, 180, 97, 256, 1, 178];
  const M = sizes.reduce((p, q) => p + q, 0);
  const w = randomF32(E * K * N, 3);
  const x = randomF32(M * K, 4);
  const y = new Float32Array(M * N);
  let t0 = performance.now();
  const peer = await createOrtPeer(w, E, K, N, threads);
  const createMs = performance.now() - t0;
  for (let i = 0; i < WARMUP; i++) await peer.run(x, sizes, y);
  const timesMs: number[] = [];
  const cpu0 = process.cpuUsage();
  const wall0 = performance.now();
  for (let i = 0; i < REPS; i++) {
    t0 = performance.now();
    await peer.run(x, sizes, y);
    timesMs.push(performance.now() - t0);
  }
  const cpu = process.cpuUsage(cpu0);
  const wallMs = performance.now() - wall0;
  await peer.close();
  // Spot-check every 13th row of the large case (the full float64 reference would take seconds).
  const largeSpotErr = maxAbsError(x, w, sizes, K, N, y, (row) => row % 13 === 0);

  return {
    threads,
    effectiveThreads: ortEffectiveThreads(),
    ortVersion,
    smallErr: errs[0],
    smallErrWeightsAsInput: errs[1],
    largeSpotErr,
    createMs,
    timesMs,
    medianMs: median(timesMs),
    cpuOverWall: (cpu.user + cpu.system) / 1000 / wallMs,
  };
}

const CHILD_FLAG = '--ort-peer-child';

async function main(): Promise<void> {
  const flagAt = process.argv.indexOf(CHILD_FLAG);
  if (flagAt >= 0) {
    const result = await child(Number(process.argv[flagAt + 1]));
    process.stdout.write(`RESULT ${JSON.stringify(result)}\n`);
    process.exit(0); // ORT's pthread workers would otherwise keep the process alive
  }

  const load = loadavg().map((l) => l.toFixed(2)).join(' ');
  console.log(`onnxruntime-web peer check (load average before: ${load})`);
  const flops = 2 * 1024 * 1024 * 2816;
  const results: ChildResult[] = [];
  let failed = false;
  for (const threads of THREAD_COUNTS) {
    // Re-run this script (with the same tsx loader flags) in a fresh process per thread count.
    const r = spawnSync(process.execPath, [...process.execArgv, process.argv[1], CHILD_FLAG, String(threads)], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'inherit'],
      maxBuffer: 16 * 2 ** 20,
    });
    const line = r.stdout.split('\n').find((l) => l.startsWith('RESULT '));
    if (r.status !== 0 || !line) {
      console.error(`child (threads=${threads}) failed: status ${r.status}\n${r.stdout}`);
      failed = true;
      continue;
    }
    const res = JSON.parse(line.slice('RESULT '.length)) as ChildResult;
    results.push(res);
    const ok = res.smallErr < 1e-4 && res.smallErrWeightsAsInput < 1e-4 && res.largeSpotErr < 1e-3;
    if (!ok) failed = true;
    console.log(
      `\nthreads=${res.threads} (ORT ${res.ortVersion}, effective numThreads=${res.effectiveThreads})\n` +
        `  correctness E=4 K=33 N=17 sizes [5,0,9,1]: max abs err ${res.smallErr.toExponential(2)} (initializer W), ` +
        `${res.smallErrWeightsAsInput.toExponential(2)} (W as input) -> ${res.smallErr < 1e-4 && res.smallErrWeightsAsInput < 1e-4 ? 'OK' : 'FAIL'}\n` +
        `  large E=8 K=1024 N=2816 M=1024 sizes [300,12,0,180,97,256,1,178]: spot-check err ${res.largeSpotErr.toExponential(2)} ` +
        `(every 13th row) -> ${res.largeSpotErr < 1e-3 ? 'OK' : 'FAIL'}\n` +
        `  session creation ${res.createMs.toFixed(0)} ms; runs [${res.timesMs.map((t) => t.toFixed(1)).join(', ')}] ms\n` +
        `  median ${res.medianMs.toFixed(1)} ms = ${(flops / res.medianMs / 1e6).toFixed(1)} GFLOP/s; ` +
        `CPU time / wall time during timed runs: ${res.cpuOverWall.toFixed(2)}`,
    );
  }
  const r1 = results.find((r) => r.threads === 1);
  const r2 = results.find((r) => r.threads === 2);
  if (r1 && r2) console.log(`\nspeed-up 2 threads vs 1: ${(r1.medianMs / r2.medianMs).toFixed(2)}x`);
  console.log(`(load average after: ${loadavg().map((l) => l.toFixed(2)).join(' ')})`);
  if (failed) process.exit(1);
}

await main();
