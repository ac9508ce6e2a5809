/**
 * The driver loop: tokens from the command line and nested batch files update one shared state
 * (batch files do not restore it: benchdnn's files `--reset` themselves); each problem descriptor
 * runs the cartesian product of the current knobs, in order, numbering tests from 0.
 */
import { parseDescriptor } from './descriptor.js';
import { createEngine, type AnyEngine } from './engine.js';
import { runProblem, type Outcome, type RunContext } from './execute.js';
import { applyKnob } from './knobs.js';
import { perfLine } from './perf.js';
import { flops, problems, reproLine, type Problem } from './problem.js';
import { count, emptySummary, statusLine, summaryLine, type Summary } from './report.js';
import { defaultGlobalSettings, defaultMatmulSettings } from './settings.js';
import { InputError, commandLineTokens, readBatch, type Token } from './source.js';

export interface DriverOptions {
  /** Directory `--batch` paths on the command line are relative to (default: process.cwd()). */
  readonly cwd?: string;
  /** Output sink, one call per line (default: console.log). */
  readonly out?: (line: string) => void;
  /** Test hook, see RunContext.perturb. */
  readonly perturb?: RunContext['perturb'];
  /** Called with every problem's outcome (tests). */
  readonly onOutcome?: (p: Problem, o: Outcome, repro: string) => void;
}

const MAX_BATCH_DEPTH = 32;

export async function runDriver(args: readonly string[], opts: DriverOptions = {}): Promise<Summary> {
  const out = opts.out ?? ((l: string) => console.log(l));
  const cwd = opts.cwd ?? process.cwd();
  const s = defaultMatmulSettings();
  const g = defaultGlobalSettings();
  const summary = emptySummary();
  let driver = false;
  let engine: Promise<AnyEngine> | undefined;
  let engineKey = '';
  const getEngine = (): Promise<AnyEngine> => {
    const key = `${g.engine}:${g.threads ?? 'auto'}`;
    if (!engine || key !== engineKey) {
      const old = engine;
      void old?.then((e) => e.release(), () => undefined);
      engineKey = key;
      engine = createEngine(g.engine, g.threads);
    }
    return engine;
  };

  const runDescriptor = async (t: Token): Promise<void> => {
    if (!driver) throw new InputError(t, `problem '${t.text}' before a driver: start with --matmul`);
    let desc;
    try {
      desc = parseDescriptor(t.text);
    } catch (e) {
      throw new InputError(t, (e as Error).message);
    }
    for (const p of problems(s, desc)) {
      const repro = reproLine(p, g.engine);
      if (s.match && !s.match.test(repro)) continue;
      const index = summary.tests;
      const o = await runProblem(p, { engine: getEngine, globals: g, seed: repro, perturb: opts.perturb });
      count(summary, o);
      opts.onOutcome?.(p, o, repro);
      if (o.perf && o.shape) out(perfLine(g.engine, o.impl ?? '', p.desc.name, repro.replace(/^(--engine=\S+ )?--matmul ?/, ''), flops(o.shape), o.perf));
      else statusLine(index, o, repro).split('\n').forEach((l) => out(l));
    }
  };

  const walk = async (tokens: readonly Token[], depth: number): Promise<void> => {
    for (const t of tokens) {
      if (!t.text.startsWith('-')) {
        await runDescriptor(t);
        continue;
      }
      if (t.text === '--matmul') driver = true;
      const a = applyKnob(t, s, g);
      if (a.kind === 'batch') {
        if (depth >= MAX_BATCH_DEPTH) throw new InputError(t, `--batch nesting deeper than ${MAX_BATCH_DEPTH}`);
        await walk(readBatch(a.path, t, cwd), depth + 1);
      }
    }
  };

  try {
    await walk(commandLineTokens(args), 0);
  } finally {
    if (engine) await engine.then((e) => e.release(), () => undefined);
  }
  out(summaryLine(summary));
  return summary;
}
