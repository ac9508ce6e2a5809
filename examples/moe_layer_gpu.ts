/**
 * A MoE layer of Qwen3-30B-A3B's shape (hidden 2048, 128 experts, top-8, intermediate 768) with int4
 * weights on the gpu engine (WebGPU): router logits -> top-8 -> dispatch -> GEMM1 + SwiGLU -> GEMM2 ->
 * combine, every stage on the device, the whole layer in one submit. Runs a decode step (T = 1) and a
 * prefill (T = 256) and prints the layer's time and each stage's.
 *
 *   npx tsx examples/moe_layer_gpu.ts [--tokens=1,256] [--scale=1]   (--scale=8 divides every size by 8)
 *
 * In Node the gpu engine needs the `webgpu` package (`npm install webgpu`); in a browser, navigator.gpu.
 * Without a GPU driver (Dawn on SwiftShader, a CPU Vulkan: VK_ICD_FILENAMES=/usr/lib/chromium/vk_swiftshader_icd.json
 * with Debian's chromium installed) use --scale=8: the full shape takes minutes on a CPU, --scale=8 about 90 s
 * on 2 cores.
 */
import { ARG, Engine, Memory, Stream, dt, memory, moe, tag, type GpuEngine, type GpuMemory } from 'groupdnn';

export interface LayerTimes {
  readonly tokens: number;
  /** Router logits to output, wait included (median). */
  readonly layerMs: number;
  /** Each stage alone with its own wait (median): [name, implementation, ms]. */
  readonly stages: readonly (readonly [string, string, number])[];
  /** The output, for checks. */
  readonly out: Float32Array;
}

async function median(fn: () => Promise<void>, reps: number): Promise<number> {
  await fn();
  const t: number[] = [];
  for (let i = 0; i < reps; i++) {
    const t0 = performance.now();
    await fn();
    t.push(performance.now() - t0);
  }
  return t.sort((a, b) => a - b)[Math.floor(t.length / 2)];
}

/** Deterministic pseudo-random bytes (the int4 codes) or small floats. */
function noise(n: number, seed: number): Uint32Array {
  const out = new Uint32Array(n);
  let s = seed >>> 0;
  for (let i = 0; i < n; i++) out[i] = s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
  return out;
}

export async function runQwen3Layer(eng: GpuEngine, tokenCounts: readonly number[], scale = 1, reps = 10): Promise<LayerTimes[]> {
  // user-code-begin
  const K = 2048 / scale, I = 768 / scale, E = Math.max(8, 128 / scale), topK = 8, block = 32;
  const strm = new Stream(eng);
  const results: LayerTimes[] = [];
  // int4 weights: s4 codes in the plain [E, K, 2I] / [E, I, K] layouts, one f32 scale per 32 rows of K
  // and column (given at execute, as a GPTQ / AWQ checkpoint stores them).
  const w13Md = memory.desc([E, K, 2 * I], dt.s4, tag.abc), w2Md = memory.desc([E, I, K], dt.s4, tag.abc);
  const w13 = Memory.create(w13Md, eng).writeBytes(new Uint8Array(noise(Math.ceil(w13Md.getSize(0) / 4), 1).buffer));
  const w2 = Memory.create(w2Md, eng).writeBytes(new Uint8Array(noise(Math.ceil(w2Md.getSize(0) / 4), 2).buffer));
  const s13 = Memory.create(memory.desc([E, K / block, 2 * I], dt.f32, tag.abc), eng).write(new Float32Array(E * (K / block) * 2 * I).fill(0.006));
  const s2 = Memory.create(memory.desc([E, I / block, K], dt.f32, tag.abc), eng).write(new Float32Array(E * (I / block) * K).fill(0.006));
  for (const T of tokenCounts) {
    const pd = new moe.layer.PrimitiveDesc(eng, {
      tokens: T, hidden: K, intermediate: I, experts: E, topK,
      routing: { scoring: 'softmax', renormalize: true },          // Qwen3: norm_topk_prob
      glu: { alg: 'glu_swiglu', layout: 'halves' },                 // w13 = [gate | up]
      weights: { w13: w13Md, w2: w2Md },
      weightScales: { w13: { mask: 7, groups: [1, block, 1] }, w2: { mask: 7, groups: [1, block, 1] } },
    });
    const layer = new moe.layer.Primitive(pd);
    const hidden = Memory.create(pd.queryMd('hidden')!, eng).write(Float32Array.from(noise(T * K, 3), (v) => v / 2 ** 31 - 1));
    const logits = Memory.create(pd.queryMd('logits')!, eng).write(Float32Array.from(noise(T * E, 4), (v) => (v / 2 ** 31 - 1) * 4));
    const out: GpuMemory = Memory.create(pd.queryMd('dst')!, eng);
    const args = {
      [ARG.SRC]: hidden, [ARG.MOE_ROUTER_LOGITS]: logits, [ARG.WEIGHTS]: w13, [ARG.WEIGHTS_1]: w2, [ARG.DST]: out,
      [ARG.ATTR_SCALES | ARG.WEIGHTS]: s13, [ARG.ATTR_SCALES | ARG.WEIGHTS_1]: s2,
    };
    const layerMs = await median(async () => {
      layer.execute(strm, args);   // records every stage; nothing reaches the host in between
      await strm.wait();           // one submit, then the device's status (bad routing data raises here)
    }, reps);
    const stages: [string, string, number][] = [];
    for (const st of layer.stages) {
      stages.push([st.name, st.implInfo, await median(async () => {
        st.execute(strm, args);
        await strm.wait();
      }, reps)]);
    }
    results.push({ tokens: T, layerMs, stages, out: await out.read() as Float32Array });
    layer.destroy();
    for (const m of [hidden, logits, out]) m.free();
  }
  for (const m of [w13, w2, s13, s2]) m.free();
  // user-code-end
  return results;
}

const isMain = typeof process !== 'undefined' && process.argv[1] !== undefined && import.meta.url.endsWith(process.argv[1].split('/').pop()!);
if (isMain) {
  const opt = (name: string, def: string): string => process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? def;
  const eng = await Engine.create({ kind: 'gpu', powerPreference: 'high-performance' });
  console.log(`gpu: ${eng.adapterInfo}`);
  const scale = Number(opt('scale', '1'));
  for (const r of await runQwen3Layer(eng, opt('tokens', '1,256').split(',').map(Number), scale)) {
    console.log(`Qwen3-30B-A3B MoE layer${scale !== 1 ? ` (sizes / ${scale})` : ''}, int4, T = ${r.tokens}: ${r.layerMs.toFixed(3)} ms (router logits -> output, one submit, wait included)`);
    for (const [name, impl, ms] of r.stages) console.log(`  ${name.padEnd(16)} ${ms.toFixed(3).padStart(8)} ms  ${impl}`);
  }
  eng.release();
}
