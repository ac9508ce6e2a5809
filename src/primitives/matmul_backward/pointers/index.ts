export { PrimitiveDesc, type P3WeightsQuery } from './pd.js';
export { Primitive } from './primitive.js';
