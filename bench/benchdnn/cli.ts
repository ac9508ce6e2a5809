/**
 * `npm run benchdnn -- --matmul [knobs] [problems]` / `groupdnn-benchdnn --matmul ...`: benchdnn's
 * matmul syntax against groupdnn (see README "Running benchdnn problem files").
 */
import { runDriver } from './driver.js';
import { InputError } from './source.js';
import { exitCode } from './report.js';

/** benchdnn's `--help`: the syntax in brief; README "Running benchdnn problem files" has every knob. */
const USAGE = `usage: groupdnn-benchdnn [--engine=cpu|gpu] [--mode=C|P|R|L] --matmul [knobs] [problems]
  problems  MxK:KxN, BxMxK:BxKxN, or with --grouped total_MxK:GxKxN (M-grouped) / Mxtotal_K:total_KxN (K-grouped)
  knobs     --batch=FILE --dt=T|T:T:T --stag= --wtag= --dtag= (any, ab, ba, abc, acb) --bia-dt= --bia_mask=
            --grouped=DIM_IDX:G:SIZES (s0+s1+..., balanced[.SEED], hot[.PCT], decode)
            --attr-scales=ARG:POLICY[:VALUE][:DT[:GROUPS]] --attr-zero-points=... --attr-post-ops=...
            --attr-fpmath= --runtime_dims_masks= --reset
  perf      --mode=P --max-ms-per-prb=MS --fix-times-per-prb=N --ctx-exe=THREADS
  e.g.      groupdnn-benchdnn --matmul --batch=bench/benchdnn/inputs/test_groupdnn_ci
            groupdnn-benchdnn --matmul --dt=f16:s4:f16 --grouped=0:4:3+0+5+8 --attr-scales=wei:7:f16:32x1 16x128:4x128x64
Output: N:PASSED|FAILED|UNIMPLEMENTED|INVALID_ARGUMENTS __REPRO: ..., then a tests: summary; exit 1 when anything
did not pass, 2 for bad input. Every knob: the README's "Running benchdnn problem files".`;

if (process.argv.slice(2).some((a) => a === '--help' || a === '-h')) {
  console.log(USAGE);
  process.exit(0);
}

try {
  const summary = await runDriver(process.argv.slice(2));
  process.exitCode = exitCode(summary);
} catch (e) {
  if (!(e instanceof InputError)) throw e;
  console.error(`groupdnn-benchdnn: ${e.message}`);
  process.exitCode = 2;
}
