export { PrimitiveDesc, MAX_EXPERTS } from './pd.js';
export { Primitive } from './primitive.js';
export { expertViews } from './expert_views.js';
export type { Expert, GroupedGemmProblem } from './problem.js';
