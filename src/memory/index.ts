import { plainDesc, MemoryDesc } from './desc.js';
import { groupedDesc } from './grouped_desc.js';
import { dt } from '../common/data_type.js';
import { tag } from './format_tag.js';

/** `memory.desc(dims, dt, tagOrStrides)` with `memory.desc.grouped(...)` attached, as in oneDNN. */
const desc = Object.assign(plainDesc, { grouped: groupedDesc });

export const memory = { desc, dataType: dt, formatTag: tag, Desc: MemoryDesc };
