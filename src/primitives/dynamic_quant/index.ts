export { PrimitiveDesc } from './pd.js';
export { Primitive } from './primitive.js';
