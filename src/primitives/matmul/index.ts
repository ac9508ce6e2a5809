export { PrimitiveDesc } from './pd.js';
export { Primitive } from './primitive.js';
export type { MatmulProblem, MatmulKind } from './problem.js';
