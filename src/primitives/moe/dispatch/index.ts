export { PrimitiveDesc, type DispatchOptions, type DispatchProblem } from './pd.js';
export { Primitive } from './primitive.js';
