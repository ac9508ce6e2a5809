export { PrimitiveDesc, type BwdDataQuery } from '../data_pd.js';
export { Primitive } from '../data_primitive.js';
