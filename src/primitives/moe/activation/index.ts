export { PrimitiveDesc, type ActivationGlu, type ActivationProblem } from './pd.js';
export { Primitive } from './primitive.js';
