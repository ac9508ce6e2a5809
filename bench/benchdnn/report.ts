/** benchdnn's output: one line per problem (`N:STATE ... __REPRO: ...`) and the closing summary. */
import type { Outcome } from './execute.js';

export interface Summary {
  tests: number;
  passed: number;
  skipped: number;
  mistrusted: number;
  unimplemented: number;
  invalid_arguments: number;
  failed: number;
  listed: number;
}

export function emptySummary(): Summary {
  return { tests: 0, passed: 0, skipped: 0, mistrusted: 0, unimplemented: 0, invalid_arguments: 0, failed: 0, listed: 0 };
}

export function count(s: Summary, o: Outcome): void {
  s.tests++;
  switch (o.state) {
    case 'PASSED': case 'EXECUTED': s.passed++; break;
    case 'MISTRUSTED': s.mistrusted++; break;
    case 'FAILED': s.failed++; break;
    case 'UNIMPLEMENTED': s.unimplemented++; break;
    case 'INVALID_ARGUMENTS': s.invalid_arguments++; break;
    case 'LISTED': s.listed++; break;
  }
}

const num = (x: number): string => (Number.isInteger(x) ? String(x) : x.toPrecision(8));

/** The status line of test `index` (perf mode prints perf lines instead, see perf.ts). */
export function statusLine(index: number, o: Outcome, repro: string): string {
  let detail = '';
  if (o.state === 'FAILED' && o.errors !== undefined) detail = ` (errors:${o.errors} total:${o.total})`;
  else if (o.reason) detail = ` (${o.reason})`;
  const lines = [`${index}:${o.state}${detail} __REPRO: ${repro}`];
  if (o.state === 'FAILED' && o.worst) lines.push(`  worst error at dst[${o.worst.index}]: exp:${num(o.worst.expected)} got:${num(o.worst.got)}`);
  return lines.join('\n');
}

export function summaryLine(s: Summary): string {
  return `tests:${s.tests} passed:${s.passed} skipped:${s.skipped} mistrusted:${s.mistrusted} unimplemented:${s.unimplemented} ` +
    `invalid_arguments:${s.invalid_arguments} failed:${s.failed} listed:${s.listed}`;
}

/** benchdnn's exit status: 1 when any test failed, was unimplemented or had invalid arguments. */
export function exitCode(s: Summary): number {
  return s.failed + s.unimplemented + s.invalid_arguments > 0 ? 1 : 0;
}
