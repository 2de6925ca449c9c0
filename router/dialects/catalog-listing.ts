/**
 * `GET /v1/models?catalog=true` (pure): the well-known models (`models/known-models.json`) in the
 * listing's shape, each with the reference a pull takes, whether it is on this node already, and
 * whether it fits this mesh's memory (on one node, split across the mesh, or not at all) from the
 * memory each node announced.
 */
import { fitOf } from "../../models/catalog-fit.ts";
import type { KnownModel } from "../../models/known-models.ts";

export function catalogListing(known: readonly KnownModel[], localNames: ReadonlySet<string>, memory: readonly number[]) {
  return {
    object: "list" as const,
    data: known.map((k) => {
      const verdict = fitOf(k.sizeBytes, memory);
      return {
        id: k.id,
        object: "model" as const,
        created: 0,
        owned_by: "catalog",
        description: k.description,
        checkpoint: `${k.repo}:${k.quant}`,
        repo: k.repo,
        quant: k.quant,
        size: k.sizeBytes,
        context_length: k.contextLength,
        downloaded: localNames.has(k.id),
        need_bytes: verdict.needBytes,
        fit: verdict.fit,
        fit_reason: verdict.reason,
      };
    }),
  };
}
