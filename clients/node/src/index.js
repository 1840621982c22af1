// llmlimit for Node 18+: reserve capacity across several limits before an
// LLM call, reconcile after it. No dependencies; uses the global fetch.

export { Client, Lease } from './client.js';
export { ApiError, Denied, LlmlimitError, TransportError, Unavailable } from './errors.js';
export { newLeaseId } from './rules.js';
