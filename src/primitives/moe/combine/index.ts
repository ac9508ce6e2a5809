export { PrimitiveDesc, type CombineOptions, type CombineProblem } from './pd.js';
export { Primitive } from './primitive.js';
export { BackwardPrimitiveDesc, type CombineBackwardQuery } from './backward_pd.js';
export { BackwardPrimitive } from './backward_primitive.js';
