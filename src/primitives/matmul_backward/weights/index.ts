export { PrimitiveDesc, type BwdWeightsQuery } from '../weights_pd.js';
export { Primitive } from '../weights_primitive.js';
