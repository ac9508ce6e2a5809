export { PrimitiveDesc, type GluBackwardOptions, type GluBackwardProblem, type GluBackwardQuery } from './pd.js';
export { Primitive } from './primitive.js';
