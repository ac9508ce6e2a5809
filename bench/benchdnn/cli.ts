/**
 * `npm run benchdnn -- --matmul [knobs] [problems]` / `groupdnn-benchdnn --matmul ...`: benchdnn's
 * matmul syntax against groupdnn (see README "Running benchdnn problem files").
 */
import { runDriver } from './driver.js';
import { InputError } from './source.js';
import { exitCode } from './report.js';

try {
  const summary = await runDriver(process.argv.slice(2));
  process.exitCode = exitCode(summary);
} catch (e) {
  if (!(e instanceof InputError)) throw e;
  console.error(`groupdnn-benchdnn: ${e.message}`);
  process.exitCode = 2;
}
