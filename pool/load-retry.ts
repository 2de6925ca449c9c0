/**
 * What a load does once its llama-server failed to start (pure): evict every idle server and start
 * once more (the nuclear retry) when freeing memory could change the outcome, else fail with an
 * error that says what to change.
 */
import { mayBeMemory, type LoadOptions } from "./pool-types.ts";

export type AfterFailedStart = { retry: true; evict: string[] } | { retry: false; message: string };

/** `idle` is what the nuclear retry may evict (`planNuclear`); with none, there is nothing to retry for. */
export function afterFailedStart(model: string, options: LoadOptions, error: string, idle: readonly string[]): AfterFailedStart {
  const requestArgs = options.requestArgs ?? [];
  // The load's draft_model is the request's choice, like its arguments: a draft that cannot open
  // (a corrupt or partial file) must not unload every idle model on this node.
  const fromRequest = requestArgs.length > 0 || options.draftModel !== undefined;
  if (mayBeMemory({ requestArgs: fromRequest, error }) && idle.length > 0) return { retry: true, evict: [...idle] };
  const given = requestArgs.length
    ? ` with llamacpp_args "${requestArgs.join(" ")}"; nothing was unloaded to retry it: try other llamacpp_args or none`
    : options.draftModel !== undefined
      ? ` with draft_model "${options.draftModel}"; nothing was unloaded to retry it: try another draft_model or none`
      : "; check --llamacpp-args and models.json";
  return { retry: false, message: `model "${model}" failed to load${given}. ${error}` };
}
