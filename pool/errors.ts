/**
 * Failures of the pool that a client can act on, each with the HTTP status the router answers with
 * and OpenAI's error type. Anything else is a 500.
 */

export class PoolError extends Error {
  constructor(
    message: string,
    readonly status: 400 | 404 | 409 | 429 | 500 | 503,
    readonly type: string,
    readonly code: string,
    /** Seconds, for 429 and 503. */
    readonly retryAfter?: number,
  ) {
    super(message);
  }
}

export const modelNotFound = (message: string) => new PoolError(message, 404, "not_found_error", "model_not_found");
/** The mesh knows the model, this node has no file for it: another node serves it. */
export const modelNotOnThisNode = (message: string) => new PoolError(message, 409, "conflict_error", "model_not_on_this_node");
export const slotsPinned = (message: string) => new PoolError(message, 409, "conflict_error", "all_slots_pinned");
/** The slot holds the model this node hosts for its mesh (`--evict-mesh-models off`). */
export const slotHeldForMesh = (message: string) => new PoolError(message, 409, "conflict_error", "slot_held_for_mesh");
/** Not enough memory for the model where the load would run it (alone, or over its group). */
export const needsCapacity = (message: string) => new PoolError(message, 503, "service_unavailable", "model_needs_capacity", 30);
export const loadTimedOut = (message: string, retryAfter: number) => new PoolError(message, 503, "service_unavailable", "model_load_timeout", retryAfter);
export const loadFailed = (message: string) => new PoolError(message, 500, "server_error", "model_load_failed");
export const badLoadRequest = (message: string) => new PoolError(message, 400, "invalid_request_error", "invalid_llamacpp_args");
/** A draft model that is not a text model this node knows (`models/model-draft.ts`). */
export const invalidDraft = (message: string) => new PoolError(message, 400, "invalid_request_error", "invalid_draft_model");
export const serverGone = (message: string) => new PoolError(message, 503, "service_unavailable", "model_server_exited", 1);
