/**
 * The one error a pull ends with, by what went wrong, so the CLI and the APIs can each say it
 * their way (an exit code, a 404 or 409, an NDJSON error line) with the same message: what
 * happened and what to do next.
 */
export type PullErrorCode = "bad_reference" | "not_found" | "gated" | "quant_not_found" | "no_space" | "name_taken" | "download_failed" | "hash_mismatch";

export class PullError extends Error {
  constructor(
    readonly code: PullErrorCode,
    message: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.name = "PullError";
  }
}
