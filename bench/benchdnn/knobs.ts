/**
 * Applies one `--knob=value` to the driver state. Matmul knobs take comma lists (each item one state
 * of the cartesian product); common options set global state. Unknown knobs are errors naming the
 * knob and where it was read.
 */
import type { DataType } from '../../src/index.js';
import { ONEDNN_ONLY_DTS, isDataType, parseFpmath, parsePostOps, parseQuant } from './attr_spec.js';
import { parseGrouped, splitGroupedList } from './grouped_spec.js';
import { defaultMatmulSettings, type DtTriple, type GlobalSettings, type MatmulSettings, type Mode } from './settings.js';
import { InputError, type Token } from './source.js';

/** benchdnn knobs this driver recognizes but groupdnn cannot honour: named in the error. */
const UNSUPPORTED = [
  'strides', 'encoding', 'attr-scratchpad', 'attr-acc-mode', 'attr-rounding-mode', 'attr-deterministic', 'attr-dropout',
  'attr-precomputed-reductions', 'impl', 'skip-impl', 'cold-cache', 'buffer-prefix', 'mode-modifier', 'num-streams',
];
/** Accepted for compatibility, no effect on groupdnn. */
const IGNORED = ['allow-enum-tags-only', 'canonical', 'mem-check', 'cpu-isa-hints', 'attr-same-pd-check', 'check-ref-impl', 'fast-ref', 'verbose', 'summary', 'start', 'repeats-per-prb'];
const OTHER_DRIVERS = ['conv', 'deconv', 'ip', 'shuffle', 'reorder', 'bnorm', 'lnorm', 'gnorm', 'rnn', 'softmax', 'pool', 'sum', 'concat', 'eltwise', 'lrn', 'binary', 'resampling', 'reduction', 'prelu', 'zeropad', 'graph', 'brgemm', 'sdpa', 'gated_mlp'];

function list<T>(value: string, one: (s: string) => T): T[] {
  return value.split(',').map(one);
}

function dtTriple(s: string): DtTriple {
  const parts = s.split(':');
  if (parts.length !== 1 && parts.length !== 3) throw new Error(`--dt=${s}: give one data type or three (src:wei:dst)`);
  parts.forEach((p) => {
    if (!isDataType(p) && !ONEDNN_ONLY_DTS.includes(p)) throw new Error(`--dt=${s}: '${p}' is not a data type`);
  });
  const t = parts as DataType[];
  return t.length === 1 ? [t[0], t[0], t[0]] : [t[0], t[1], t[2]];
}

function formatTag(s: string, knob: string): string {
  if (s !== 'any' && !/^[a-l]+$/.test(s)) throw new Error(`--${knob}=${s}: a tag is 'any' or letters naming dims (ab, abc, acb, ...)`);
  return s;
}

function int(s: string, knob: string, min = 0): number {
  if (!/^-?\d+$/.test(s) || Number(s) < min) throw new Error(`--${knob}=${s}: expected an integer >= ${min}`);
  return Number(s);
}

/** What the parser loop must do after a token. */
export type KnobAction = { kind: 'done' } | { kind: 'batch'; path: string };

/** Applies `t` (a token starting with `-`) to the state; throws InputError naming the knob and its place. */
export function applyKnob(t: Token, s: MatmulSettings, g: GlobalSettings): KnobAction {
  const m = /^--?([A-Za-z0-9_-]+)(?:=(.*))?$/s.exec(t.text);
  if (!m) throw new InputError(t, `malformed option '${t.text}'`);
  const [, name, value] = m;
  const v = value ?? '';
  try {
    switch (name) {
      case 'matmul': return { kind: 'done' };
      case 'reset': Object.assign(s, defaultMatmulSettings()); return { kind: 'done' };
      case 'batch':
        if (!v) throw new Error('--batch needs a file name');
        return { kind: 'batch', path: v };
      case 'dt': s.dt = list(v, dtTriple); break;
      case 'stag': case 'wtag': case 'dtag': s[name] = list(v, (x) => formatTag(x, name)); break;
      case 'bia-dt': case 'bia_dt':
        s.biaDt = list(v, (x) => {
          if (x !== 'undef' && !isDataType(x)) throw new Error(`--${name}=${v}: '${x}' is not a data type`);
          return x as DataType | 'undef';
        });
        break;
      case 'bia_mask': case 'bia-mask': s.biaMask = list(v, (x) => int(x, name)); break;
      case 'runtime_dims_masks': case 'runtime-dims-masks':
        s.rtDimsMasks = list(v, (x) => {
          const [a, b = '0', ...rest] = x.split(':');
          if (rest.length) throw new Error(`--${name}=${x}: expected SRC_MASK[:WEI_MASK]`);
          return [int(a || '0', name), int(b || '0', name)] as const;
        });
        break;
      case 'grouped': s.grouped = splitGroupedList(v).map(parseGrouped); break;
      case 'attr-scales': s.scales = list(v, (x) => parseQuant(x, '--attr-scales')); break;
      case 'attr-zero-points': s.zeroPoints = list(v, (x) => parseQuant(x, '--attr-zero-points')); break;
      case 'attr-post-ops': s.postOps = list(v, parsePostOps); break;
      case 'attr-fpmath': s.fpmath = list(v, parseFpmath); break;
      case 'match': s.match = v ? new RegExp(v) : undefined; break;
      case 'mode': {
        const mode = v.toUpperCase();
        if (!['C', 'P', 'R', 'L'].includes(mode)) throw new Error(`--mode=${v}: groupdnn's driver runs C (correctness), P (performance), R (run only) or L (list)`);
        g.mode = mode as Mode;
        break;
      }
      case 'engine': {
        const [kind, index = '0'] = v.split(':');
        if (kind !== 'cpu' && kind !== 'gpu') throw new Error(`--engine=${v}: KIND must be cpu or gpu`);
        if (index !== '0') throw new Error(`--engine=${v}: groupdnn has one engine of each kind (index 0)`);
        g.engine = kind;
        break;
      }
      case 'ctx-exe': case 'ctx-init': {
        const first = v.split(':')[0];
        if (name === 'ctx-exe') g.threads = first === 'auto' ? undefined : int(first, name, 1);
        break;
      }
      case 'max-ms-per-prb': g.maxMsPerPrb = Math.min(60000, Math.max(10, int(v, name, 1))); break;
      case 'fix-times-per-prb': g.fixTimesPerPrb = int(v, name); break;
      case 'perf-template':
        if (v !== 'def') throw new Error(`--perf-template=${v}: only the default template (def) is implemented`);
        break;
      default:
        if (/^v\d+$/.test(name) || IGNORED.includes(name)) break;
        if (UNSUPPORTED.includes(name)) throw new Error(`option '--${name}' is a benchdnn knob that groupdnn's driver does not implement`);
        if (OTHER_DRIVERS.includes(name)) throw new Error(`driver '--${name}' is not available: groupdnn's driver runs --matmul only`);
        throw new Error(`unknown option '${t.text.split('=')[0]}'`);
    }
  } catch (e) {
    if (e instanceof InputError) throw e;
    throw new InputError(t, (e as Error).message);
  }
  return { kind: 'done' };
}
