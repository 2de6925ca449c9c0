/**
 * Whether a well-known model fits this mesh's memory (pure): on one node, split across the
 * mesh's nodes together, or not at all, from the memory each node announced. The catalog knows a
 * model's file size, not its layers, so its need is the weights with the same 10% headroom the
 * mesh plans with (`modelNeedBytes`); the KV cache for a long context comes on top.
 */
import { modelNeedBytes } from "./model-need.ts";

export type Fit = "one-node" | "split" | "none";

export interface FitVerdict {
  fit: Fit;
  needBytes: number;
  /** What the verdict rests on, in words. */
  reason: string;
}

const gib = (b: number) => `${(b / 2 ** 30).toFixed(1)} GiB`;

export function fitOf(sizeBytes: number, nodes: readonly number[]): FitVerdict {
  const needBytes = modelNeedBytes(sizeBytes, 0);
  const largest = nodes.reduce((m, b) => Math.max(m, b), 0);
  const together = nodes.reduce((s, b) => s + b, 0);
  const count = `${nodes.length} node${nodes.length === 1 ? "" : "s"}`;
  if (needBytes <= largest) return { fit: "one-node", needBytes, reason: `needs ${gib(needBytes)}; the largest node offers ${gib(largest)}` };
  if (needBytes <= together && nodes.length > 1) return { fit: "split", needBytes, reason: `needs ${gib(needBytes)}; no node offers that alone, the ${count} together offer ${gib(together)}` };
  return { fit: "none", needBytes, reason: `needs ${gib(needBytes)}; the ${count} of this mesh offer ${gib(together)} together` };
}
