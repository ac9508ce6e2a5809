/**
 * A tiny MoE layer trained on a synthetic regression task (teacher-student): a fixed random "teacher"
 * layer (router + experts) makes the targets, a "student" of the same shape starts from other random
 * weights and learns its router, w13, w2 and both biases with Adam, through
 * `moe.layer` with `propKind: 'forward_training'` and `moe.layer.BackwardPrimitive`. The router is a
 * plain dense matmul (`logits = x . Wr`) whose weight gradient is another matmul (`xᵀ . d logits`).
 *
 *   npx tsx examples/train_step.ts [steps] [threads]
 */
import { pathToFileURL } from 'node:url';
import { ARG, Engine, Memory, Stream, dt, matmul, memory, moe, tag, type MemoryDesc } from 'groupdnn';

export interface TrainOptions {
  readonly steps?: number;
  readonly threads?: number;
  readonly log?: (step: number, loss: number) => void;
}

export interface TrainResult {
  /** Loss of every step (0.5 * squared error summed over a token's outputs, mean over tokens). */
  readonly losses: number[];
  /** The loss of always predicting 0 (0.5 * |target|² per token), the scale to judge the losses by. */
  readonly baseline: number;
}

const T = 64, K = 16, I = 16, E = 4, TOPK = 2;

/** Deterministic uniform [-1, 1) generator. */
function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = Math.imul(s ^ (s >>> 15), 1 | s);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 31 - 1;
  };
}

export async function train(o: TrainOptions = {}): Promise<TrainResult> {
  const steps = o.steps ?? 300;
  await using eng = await Engine.create({ threads: o.threads ?? 1 });
  const strm = new Stream(eng);
  const mem = (md: MemoryDesc, fill?: (i: number) => number): Memory => {
    const m = Memory.create(md, eng);
    if (fill) (m.values as Float32Array).forEach((_, i, a) => (a[i] = fill(i)));
    return m;
  };
  const config = { tokens: T, hidden: K, intermediate: I, experts: E, topK: TOPK, bias: true, routing: { renormalize: true } } as const;
  const plain = { w13: memory.desc([E, K, 2 * I], dt.f32, tag.abc), w2: memory.desc([E, I, K], dt.f32, tag.abc) };

  // The router: logits [T, E] = x [T, K] . Wr [K, E]; its weight gradient xᵀ . d logits reads x transposed.
  const xMd = memory.desc([T, K], dt.f32, tag.ab);
  const wrMd = memory.desc([K, E], dt.f32, tag.ab);
  const logitsMd = memory.desc([T, E], dt.f32, tag.ab);
  const router = new matmul.Primitive(new matmul.PrimitiveDesc(eng, xMd, wrMd, logitsMd));
  const xTMd = memory.desc([K, T], dt.f32, [1, K]);
  const routerGrad = new matmul.Primitive(new matmul.PrimitiveDesc(eng, xTMd, logitsMd, wrMd));

  // Teacher: an inference layer on fixed random weights.
  const tr = rng(7);
  const teacher = new moe.layer.Primitive(new moe.layer.PrimitiveDesc(eng, { ...config, weights: plain }));
  const tWr = mem(wrMd, () => tr());
  const tW13 = mem(plain.w13, () => tr() * 0.5), tW2 = mem(plain.w2, () => tr() * 0.5);
  const tB13 = mem(memory.desc([E, 2 * I], dt.f32, tag.ab), () => tr() * 0.1), tB2 = mem(memory.desc([E, K], dt.f32, tag.ab), () => tr() * 0.1);

  // Student: the training forward, its backward, and its parameters with momentum buffers.
  const pd = new moe.layer.PrimitiveDesc(eng, { ...config, propKind: 'forward_training' });
  const fwd = new moe.layer.Primitive(pd);
  const bpd = new moe.layer.BackwardPrimitiveDesc(eng, pd);
  const bwd = new moe.layer.BackwardPrimitive(bpd, fwd);
  const sr = rng(11);
  const params = {
    wr: mem(wrMd, () => sr() * 0.5), w13: mem(plain.w13, () => sr() * 0.3), w2: mem(plain.w2, () => sr() * 0.3),
    b13: mem(pd.queryMd('w13_bias')!), b2: mem(pd.queryMd('w2_bias')!),
  };
  const grads = {
    wr: mem(wrMd), w13: mem(bpd.queryMd('diff_w13')!), w2: mem(bpd.queryMd('diff_w2')!),
    b13: mem(bpd.queryMd('diff_w13_bias')!), b2: mem(bpd.queryMd('diff_w2_bias')!),
  };
  const moments = (): Record<keyof typeof params, Float64Array> => Object.fromEntries(Object.entries(params).map(([n, p]) => [n, new Float64Array(p.values.length)])) as Record<keyof typeof params, Float64Array>;
  const m1 = moments(), m2 = moments();

  const x = mem(xMd), xT = Memory.create(xTMd, eng, [x.handles[0]]);
  const tLogits = mem(logitsMd), target = mem(xMd);
  const logits = mem(logitsMd), out = mem(xMd), dOut = mem(xMd);
  const dX = mem(xMd), dLogits = mem(logitsMd);
  const data = rng(3);
  const losses: number[] = [];
  let baseline = 0;
  const lr = 0.01, beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  for (let step = 0; step < steps; step++) {
    (x.values as Float32Array).forEach((_, i, a) => (a[i] = data()));
    // targets from the teacher
    router.execute(strm, { [ARG.SRC]: x, [ARG.WEIGHTS]: tWr, [ARG.DST]: tLogits });
    teacher.execute(strm, {
      [ARG.SRC]: x, [ARG.MOE_ROUTER_LOGITS]: tLogits, [ARG.WEIGHTS]: tW13, [ARG.WEIGHTS_1]: tW2, [ARG.BIAS]: tB13, [ARG.MOE_W2_BIAS]: tB2, [ARG.DST]: target,
    });
    // student forward
    router.execute(strm, { [ARG.SRC]: x, [ARG.WEIGHTS]: params.wr, [ARG.DST]: logits });
    fwd.execute(strm, {
      [ARG.SRC]: x, [ARG.MOE_ROUTER_LOGITS]: logits, [ARG.WEIGHTS]: params.w13, [ARG.WEIGHTS_1]: params.w2, [ARG.BIAS]: params.b13, [ARG.MOE_W2_BIAS]: params.b2, [ARG.DST]: out,
    });
    await strm.wait();
    // loss = 0.5 * sum over a token's K outputs of (out - target)^2, averaged over tokens; d loss / d out = (out - target) / T
    const ov = out.values as Float32Array, tv = target.values as Float32Array, dv = dOut.values as Float32Array;
    let loss = 0, base = 0;
    for (let i = 0; i < ov.length; i++) {
      const d = ov[i] - tv[i];
      loss += 0.5 * d * d;
      base += 0.5 * tv[i] * tv[i];
      dv[i] = d / T;
    }
    losses.push(loss / T);
    baseline += base / T / steps;
    o.log?.(step, loss / T);
    // student backward, then the router's weight gradient
    bwd.execute(strm, {
      [ARG.DIFF_DST]: dOut, [ARG.MOE_ROUTER_LOGITS]: logits, [ARG.WEIGHTS]: params.w13, [ARG.WEIGHTS_1]: params.w2,
      [ARG.DIFF_SRC]: dX, [ARG.MOE_DIFF_ROUTER_LOGITS]: dLogits, [ARG.DIFF_WEIGHTS]: grads.w13, [ARG.DIFF_WEIGHTS_1]: grads.w2,
      [ARG.DIFF_BIAS]: grads.b13, [ARG.MOE_DIFF_W2_BIAS]: grads.b2,
    });
    routerGrad.execute(strm, { [ARG.SRC]: xT, [ARG.WEIGHTS]: dLogits, [ARG.DST]: grads.wr });
    await strm.wait();
    // Adam, in place in the engine heap (the next forward reads the new weights)
    const c1 = 1 - beta1 ** (step + 1), c2 = 1 - beta2 ** (step + 1);
    for (const n of Object.keys(params) as (keyof typeof params)[]) {
      const p = params[n].values as Float32Array, g = grads[n].values as Float32Array, a = m1[n], b = m2[n];
      for (let i = 0; i < p.length; i++) {
        a[i] = beta1 * a[i] + (1 - beta1) * g[i];
        b[i] = beta2 * b[i] + (1 - beta2) * g[i] * g[i];
        p[i] -= (lr * a[i]) / c1 / (Math.sqrt(b[i] / c2) + eps);
      }
    }
  }
  bwd.destroy();
  fwd.destroy();
  teacher.destroy();
  return { losses, baseline };
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const steps = Number(process.argv[2] ?? 300), threads = Number(process.argv[3] ?? 1);
  const r = await train({ steps, threads, log: (s, l) => { if (s % 25 === 0 || s === steps - 1) console.log(`step ${String(s).padStart(4)}  loss ${l.toExponential(3)}`); } });
  const tail = r.losses.slice(-10).reduce((a, b) => a + b, 0) / Math.min(10, r.losses.length);
  console.log(`baseline (predict 0) ${r.baseline.toExponential(3)}; last-10 mean loss ${tail.toExponential(3)} = ${(tail / r.baseline).toFixed(3)} of the baseline`);
}
