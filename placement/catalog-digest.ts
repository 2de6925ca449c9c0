/**
 * A short digest of a catalog (pure): what every node of a mesh should agree on once it has heard
 * the same announcements. Lists of node ids are sorted first (each node reads its own view first),
 * so two nodes with the same view give the same digest; a status shows it, and `bench/scale.ts`
 * waits for one digest across a mesh.
 */
import { createHash } from "node:crypto";
import type { CatalogModel } from "./catalog.ts";

const sorted = (ids: readonly string[]) => [...ids].sort();

export function catalogDigest(models: readonly CatalogModel[]): string {
  const canonical = [...models]
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
    .map((m) => [m.name, m.identity ?? null, m.host ?? null, m.servedBy ?? null, sorted(m.servers), sorted(m.nodesServing), sorted(m.nodesOnDisk), m.split, m.idle, m.status, m.caps ?? null]);
  return createHash("sha256").update(JSON.stringify(canonical)).digest("hex").slice(0, 16);
}
