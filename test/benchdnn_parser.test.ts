/**
 * benchdnn driver (issue 17), parsing: batch files (comments, nested paths relative to the including
 * file, shared state), comma lists in benchdnn's cartesian order, --reset, --grouped forms (M-grouped
 * 2Dx3D, K-grouped 2Dx2D, profiles, hint), repro lines, and the error for an unknown knob.
 */
import { mkdtempSync, mkdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { runDriver } from '../bench/benchdnn/driver.js';
import { parseGrouped, resolveSizes, splitGroupedList } from '../bench/benchdnn/grouped_spec.js';
import { parseDescriptor } from '../bench/benchdnn/descriptor.js';
import { parsePostOps, parseQuant } from '../bench/benchdnn/attr_spec.js';
import { problems, reproLine, shapeOf, ProblemRejection } from '../bench/benchdnn/problem.js';
import { defaultMatmulSettings } from '../bench/benchdnn/settings.js';
import { tokenizeBatch } from '../bench/benchdnn/source.js';

/** Runs the driver in listing mode (no engine) and returns the repro lines. */
async function list(args: string[], cwd?: string): Promise<string[]> {
  const lines: string[] = [];
  await runDriver(['--mode=L', ...args], { out: (l) => lines.push(l), cwd });
  return lines.filter((l) => /^\d+:/.test(l)).map((l) => l.replace(/^\d+:LISTED __REPRO: /, ''));
}

describe('batch files', () => {
  it('tokenizes: # starts a comment, whitespace separates, lines are kept', () => {
    const t = tokenizeBatch('--reset # restore\n\n  --dt=f32   --wtag=abc\n# all comment --dt=bf16\n4x8:1x8x8', 'f');
    expect(t.map((x) => [x.text, x.line])).toEqual([['--reset', 1], ['--dt=f32', 3], ['--wtag=abc', 3], ['4x8:1x8x8', 5]]);
  });

  it('nested --batch paths are relative to the including file, and state carries across files', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'benchdnn-'));
    mkdirSync(join(dir, 'sub', 'deeper'), { recursive: true });
    writeFileSync(join(dir, 'top'), '--reset\n--dt=bf16  # set before including\n--batch=sub/mid\n4x8:2x8x4\n');
    writeFileSync(join(dir, 'sub', 'mid'), '--wtag=abc\n--batch=deeper/leaf\n');
    writeFileSync(join(dir, 'sub', 'deeper', 'leaf'), '--grouped=0:2:1+3\n4x8:2x8x4 # the leaf problem\n');
    // cwd is the parent of dir: only the command-line path is relative to it.
    const r = await list(['--matmul', `--batch=${dir.split('/').pop()}/top`], join(dir, '..'));
    expect(r).toEqual([
      '--matmul --dt=bf16 --wtag=abc --grouped=0:2:1+3 4x8:2x8x4',
      // The leaf's --grouped stays set after the file ends (benchdnn files --reset themselves).
      '--matmul --dt=bf16 --wtag=abc --grouped=0:2:1+3 4x8:2x8x4',
    ]);
  });

  it('a file not found beside the including one is looked up in bench/benchdnn/inputs, as benchdnn does', async () => {
    const r = await list(['--matmul', '--batch=test_groupdnn_ci'], tmpdir());
    expect(r.length).toBeGreaterThan(600);
    await expect(list(['--matmul', '--batch=no_such_file'], tmpdir())).rejects.toThrow("command line argument 3: --batch: cannot find 'no_such_file'");
  });

  it('an unknown knob is an error naming the knob, the file and the line', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'benchdnn-'));
    writeFileSync(join(dir, 'f'), '--reset\n# comment\n--dt=f32\n  --not-a-knob=3\n');
    await expect(list(['--matmul', `--batch=${join(dir, 'f')}`])).rejects.toThrow(`${join(dir, 'f')}:4: unknown option '--not-a-knob'`);
    await expect(list(['--matmul', '--wtag=abc', '--bogus'])).rejects.toThrow("command line argument 4: unknown option '--bogus'");
    await expect(list(['--matmul', '--strides=1x1:1x1'])).rejects.toThrow("'--strides' is a benchdnn knob that groupdnn's driver does not implement");
    await expect(list(['--matmul', '--dt=f33'])).rejects.toThrow("command line argument 3: --dt=f33: 'f33' is not a data type");
    await expect(list(['4x8:1x8x8'])).rejects.toThrow('before a driver');
  });
});

describe('cartesian product and --reset', () => {
  it('iterates comma lists outermost first: dt, stag, wtag, dtag, grouped, bia-dt, bia_mask, ..., scales, zero points, post-ops, fpmath', async () => {
    const r = await list(['--matmul', '--dt=f32,bf16', '--wtag=abc,acb', '--grouped=0:2:1+1,0:2:2+0', '--attr-post-ops=relu,', '2x8:2x8x4']);
    const key = (l: string): string => [/--dt=(\S+)/, /--wtag=(\S+)/, /--grouped=(\S+)/, /--attr-post-ops=(\S+)/].map((re) => re.exec(l)?.[1] ?? '-').join(' ');
    const want: string[] = [];
    for (const dt of ['-', 'bf16']) for (const w of ['abc', 'acb']) for (const g of ['0:2:1+1', '0:2:2+0']) for (const po of ['relu', '-']) want.push([dt, w, g, po].join(' '));
    expect(r.map(key)).toEqual(want);
  });

  it('--reset restores the matmul defaults, not the common options', async () => {
    const r = await list(['--matmul', '--dt=bf16', '--wtag=abc', '--bia-dt=f32', '--attr-scales=wei:5', '2x8:8x4', '--reset', '2x8:8x4']);
    expect(r).toEqual(['--matmul --dt=bf16 --wtag=abc --bia-dt=f32 --attr-scales=wei:5 2x8:8x4', '--matmul 2x8:8x4']);
  });

  it('--match keeps the problems whose repro line matches', async () => {
    expect(await list(['--matmul', '--match=acb', '--wtag=abc,acb', '2x8:8x4'])).toEqual(['--matmul --wtag=acb 2x8:8x4']);
  });

  it('repro lines parse back to the same problem', async () => {
    const first = await list(['--matmul', '--dt=u8:s8:f32', '--stag=ab', '--wtag=acb', '--grouped=0:3:balanced.7:9', '--bia-dt=bf16', '--attr-scales=src:1+wei:7:bf16:16x1',
      '--attr-zero-points=wei:5:s8', '--attr-post-ops=swish:1+mul:f32:3:grouped', '--attr-fpmath=f16:true', '12x32:3x32x8nname']);
    expect(first).toHaveLength(1);
    expect(await list(first[0].split(' '))).toEqual(first);
  });
});

describe('--grouped and problem descriptors', () => {
  it('explicit sizes, hint, profiles; K-grouped 2Dx2D', () => {
    expect(parseGrouped('0:4:3+0+5+8')).toMatchObject({ dimIdx: 0, groups: 4, sizes: [3, 0, 5, 8], hint: undefined });
    expect(parseGrouped('0:4:3+0+5+8:8')).toMatchObject({ sizes: [3, 0, 5, 8], hint: 8 });
    expect(parseGrouped('1:3:hot.80')).toMatchObject({ dimIdx: 1, profile: 'hot', param: 80 });
    expect(parseGrouped('0:32:decode:100')).toMatchObject({ profile: 'decode', hint: 100 });
    expect(resolveSizes(parseGrouped('0:6:hot'), 6)).toEqual([3, 1, 1, 1, 0, 0]);
    expect(resolveSizes(parseGrouped('0:4:hot.100'), 32)).toEqual([32, 0, 0, 0]);
    expect(resolveSizes(parseGrouped('0:8:decode'), 3)).toEqual([1, 0, 1, 0, 0, 1, 0, 0]);
    expect(resolveSizes(parseGrouped('0:4:decode'), 10)).toEqual([3, 3, 2, 2]);
    for (const seed of [1, 2, 3]) {
      const s = resolveSizes(parseGrouped(`0:5:balanced.${seed}`), 37);
      expect(s).toHaveLength(5);
      expect(s.reduce((a, b) => a + b, 0)).toBe(37);
    }
    expect(splitGroupedList('0:4:8,8,8,8,0:4:balanced,1:2:hot.80')).toEqual(['0:4:8,8,8,8', '0:4:balanced', '1:2:hot.80']);
    for (const bad of ['0:4', '0:0:1', 'x:4:1+2', '0:4:1+a', '0:4:warm', '0:4:hot.101', '0:4:decode.3', '0:4:1+1+1+1:h']) expect(() => parseGrouped(bad), bad).toThrow('--grouped=');
  });

  it('derives grouped shapes from the descriptor, and rejects inconsistent ones', () => {
    const shape = (grouped: string, desc: string) => {
      const s = defaultMatmulSettings();
      s.grouped = [parseGrouped(grouped)];
      return shapeOf([...problems(s, parseDescriptor(desc))][0]);
    };
    expect(shape('0:4:3+0+5+8', '16x32:4x32x24')).toEqual({ kind: 'grouped_m', G: 4, M: 16, K: 32, N: 24, sizes: [3, 0, 5, 8] });
    expect(shape('1:3:0+16+5', '6x21:21x10')).toEqual({ kind: 'grouped_k', G: 3, M: 6, K: 21, N: 10, sizes: [0, 16, 5] });
    expect(shape('1:2:1+1', '4x2:2x3:2x4x3')).toMatchObject({ kind: 'grouped_k', G: 2 });
    const reject = (g: string, d: string, status: string, msg: string): void => {
      try {
        shape(g, d);
        expect.unreachable();
      } catch (e) {
        expect(e).toBeInstanceOf(ProblemRejection);
        expect((e as ProblemRejection).status).toBe(status);
        expect((e as Error).message).toContain(msg);
      }
    };
    reject('0:4:3+0+5+7', '16x32:4x32x24', 'invalid_arguments', 'sizes sum to 15');
    reject('0:4:3+0+5+8', '16x32:1x4x32x24', 'invalid_arguments', 'weights must be GxKxN (or KxN, G inserted)');
    // Older oneDNN files: 2D KxN weights (G inserted), comma-separated sizes, a named dimension.
    expect(shape('0:4:3+0+5+8', '16x32:32x24')).toEqual({ kind: 'grouped_m', G: 4, M: 16, K: 32, N: 24, sizes: [3, 0, 5, 8] });
    expect(shape('M:4:3,0,5,8', '16x32:32x24')).toMatchObject({ kind: 'grouped_m', sizes: [3, 0, 5, 8] });
    reject('0:4:3+0+5+8', '16x32:3x32x24', 'invalid_arguments', 'must equal NUM_GROUPS 4');
    reject('1:2:1+1', '4x2:2x2x3', 'invalid_arguments', 'weights must be 2D');
    reject('2:2:1+1', '4x2:2x3', 'unimplemented', 'grouping dimension 2 (N)');
  });

  it('parses descriptors with an optional dst and name, and attribute values', () => {
    expect(parseDescriptor('2x10x30:2x30x20:2x10x20nbert_qkv')).toEqual({ src: [2, 10, 30], wei: [2, 30, 20], dst: [2, 10, 20], name: 'bert_qkv', text: '2x10x30:2x30x20:2x10x20nbert_qkv' });
    expect(() => parseDescriptor('2x10')).toThrow('expected two or three tensors');
    expect(parseQuant('src:common:0.5+wei:7:bf16:128x1', '--attr-scales').entries).toEqual([
      { arg: 'src', policy: 'common', value: 0.5, dataType: 'f32', groups: [] },
      { arg: 'wei', policy: '7', value: undefined, dataType: 'bf16', groups: [128, 1] },
    ]);
    expect(parseQuant('wei:5', '--attr-zero-points').entries[0].dataType).toBe('s32');
    expect(() => parseQuant('src:1+src:3', '--attr-scales')).toThrow('an ARG appears twice');
    expect(parsePostOps('eltwise_swish:1.0+mul:f16:3:grouped+sum:0.5').ops).toEqual([
      { kind: 'eltwise', alg: 'swish', alpha: 1, beta: 0, scale: 1 },
      { kind: 'binary', alg: 'mul', dataType: 'f16', maskInput: '3', tag: 'grouped' },
      { kind: 'sum', scale: 0.5, zeroPoint: 0, dataType: 'undef' },
    ]);
    expect(() => parsePostOps('frobnicate')).toThrow("unknown post-op 'frobnicate'");
    const s = defaultMatmulSettings();
    expect(reproLine([...problems(s, parseDescriptor('2x8:1x8x4'))][0], 'gpu')).toBe('--engine=gpu --matmul 2x8:1x8x4');
  });
});
