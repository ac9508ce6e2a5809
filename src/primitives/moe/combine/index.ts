export { PrimitiveDesc, type CombineOptions, type CombineProblem } from './pd.js';
export { Primitive } from './primitive.js';
