/**
 * Which model a node without one should serve (pure), in this order:
 * 1. a model that cannot run without this node's memory (its group is short, and this node would
 *    bring it over the need);
 * 2. a model nobody serves that fits on this node and is on its disk;
 * 3. a served model whose split would gain capacity (it runs over several nodes), on its disk;
 * 4. rules 2 and 3 again for models it must download first (someone has the file, or a source or reference);
 * 5. the largest model's group.
 * Ties: on disk, then larger, then name. Models unloaded for idleness are skipped until asked for;
 * a node started with `--model` chooses among those only. A node that does not fetch models
 * (`--fetch off`) lends memory to groups only: it never takes a model it would have to download,
 * nor one that nobody else serves (it would be the host of a model it cannot get).
 */
import { byCodePoint, type CatalogModel, type NodeView } from "./catalog.ts";

export interface Assignment {
  model: string;
  rule: 1 | 2 | 3 | 4 | 5;
  /** The file must be fetched first (from a peer that has it, or its source). */
  download: boolean;
}

export function allocate(
  self: Pick<NodeView, "nodeId" | "vramBytes" | "modelsOnDisk" | "fetches">,
  models: readonly CatalogModel[],
  only?: readonly string[],
): Assignment | undefined {
  const onDisk = (m: CatalogModel) => self.modelsOnDisk.some((d) => d.name === m.name);
  const fetchable = (m: CatalogModel) => onDisk(m) || m.nodesOnDisk.length > 0 || m.source !== undefined || m.ref !== undefined;
  const byPreference = (a: CatalogModel, b: CatalogModel) =>
    Number(onDisk(b)) - Number(onDisk(a)) || b.sizeBytes - a.sizeBytes || byCodePoint(a.name, b.name);
  const first = (rule: Assignment["rule"], candidates: CatalogModel[], order = byPreference): Assignment | undefined => {
    const m = candidates.filter(fetchable).sort(order)[0];
    return m && { model: m.name, rule, download: !onDisk(m) };
  };
  const largest = (a: CatalogModel, b: CatalogModel) => b.sizeBytes - a.sizeBytes || byCodePoint(a.name, b.name);

  const lendsOnly = self.fetches === false;
  const open = models.filter((m) => !m.idle && (!only || only.includes(m.name)) && (!lendsOnly || onDisk(m) || m.nodesServing.length > 0));
  const needsMe = open.filter((m) => m.status === "needs-capacity" && m.capacityBytes + self.vramBytes >= m.needBytes);
  const unserved = open.filter((m) => m.nodesServing.length === 0 && m.status !== "ready" && self.vramBytes >= m.needBytes);
  const growable = open.filter((m) => m.split && m.status !== "needs-capacity");
  const toDownload = (list: CatalogModel[]) => (lendsOnly ? [] : list.filter((m) => !onDisk(m)));

  return (
    first(1, needsMe) ??
    first(2, unserved.filter(onDisk)) ??
    first(3, growable.filter(onDisk)) ??
    first(4, toDownload(unserved)) ??
    first(4, toDownload(growable)) ??
    first(5, open, largest)
  );
}
