/**
 * Inputs more than one fuzzed surface needs: byte strings cut at arbitrary points (how a socket
 * hands a stream over), and small byte-level mutations of a valid message.
 */
import fc from "fast-check";

/** Cuts `bytes` at the given (unsorted, possibly repeated) offsets: every piece, empty ones too. */
export function cutAt(bytes: Uint8Array, offsets: readonly number[]): Uint8Array[] {
  const points = [...new Set(offsets.map((o) => o % (bytes.length + 1)))].sort((a, b) => a - b);
  const out: Uint8Array[] = [];
  let at = 0;
  for (const p of [...points, bytes.length]) {
    out.push(bytes.slice(at, p));
    at = p;
  }
  return out;
}

/** Offsets to cut any input with: few or many, so one-byte chunks and whole streams both come up. */
export const cuts = fc.array(fc.nat(), { maxLength: 64 });

import { concat } from "../../harness/rpc-frames.ts";

export { concat };

export type Mutation =
  | { kind: "flip"; at: number; bit: number }
  | { kind: "set"; at: number; value: number }
  | { kind: "truncate"; at: number }
  | { kind: "insert"; at: number; bytes: Uint8Array }
  | { kind: "delete"; at: number; length: number };

export const mutation: fc.Arbitrary<Mutation> = fc.oneof(
  fc.record({ kind: fc.constant("flip" as const), at: fc.nat(), bit: fc.integer({ min: 0, max: 7 }) }),
  fc.record({ kind: fc.constant("set" as const), at: fc.nat(), value: fc.integer({ min: 0, max: 255 }) }),
  fc.record({ kind: fc.constant("truncate" as const), at: fc.nat() }),
  fc.record({ kind: fc.constant("insert" as const), at: fc.nat(), bytes: fc.uint8Array({ minLength: 1, maxLength: 16 }) }),
  fc.record({ kind: fc.constant("delete" as const), at: fc.nat(), length: fc.integer({ min: 1, max: 16 }) }),
);

/** Applies mutations in order; offsets wrap around the current length. */
export function mutate(bytes: Uint8Array, mutations: readonly Mutation[]): Uint8Array {
  let b: Uint8Array = bytes.slice();
  for (const m of mutations) {
    const at = b.length === 0 ? 0 : m.at % b.length;
    if (m.kind === "flip" && b.length) b[at] = b[at]! ^ (1 << m.bit);
    else if (m.kind === "set" && b.length) b[at] = m.value;
    else if (m.kind === "truncate") b = b.slice(0, at);
    else if (m.kind === "insert") b = concat([b.subarray(0, at), m.bytes, b.subarray(at)]);
    else if (m.kind === "delete") b = concat([b.subarray(0, at), b.subarray(at + m.length)]);
  }
  return b;
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();
/** The same mutations over text (as UTF-8; broken sequences come back as U+FFFD, as a reader sees them). */
export const mutateText = (text: string, mutations: readonly Mutation[]): string => decoder.decode(mutate(encoder.encode(text), mutations));
