/**
 * Where a node serves its API, read from its own log: main.ts says it once the API is bound, with
 * the address `--listen`, `--port` (0: a free one), the environment or a config file decided.
 */

/** The API's URL from the node's "mesh API listening on URL" line (text or JSON), once the line is whole. */
export function apiUrlIn(log: string): string | undefined {
  return /mesh API listening on (http:\/\/[^\s"]+)[\s"]/.exec(log)?.[1];
}
