/**
 * `mesh models`: the models on this machine, with where each came from and where it lies. From the
 * local node when one answers (it knows what is loaded), else from a scan of the models dir and
 * the other tools' stores as a node with these settings would make it.
 */
import type { Config } from "../config/config.ts";
import { CommandError } from "./common.ts";
import { errorText, localNode, localStore } from "./local-node.ts";

export interface ModelRow {
  name: string;
  sizeBytes: number;
  quant: string | null;
  store: string;
  path: string;
  loaded: boolean;
}

const size = (b: number) => (b >= 2 ** 30 ? `${(b / 2 ** 30).toFixed(1)} GiB` : `${(b / 2 ** 20).toFixed(1)} MiB`);

/** The table (pure, so it is tested as text). */
export function formatModels(rows: readonly ModelRow[]): string {
  if (rows.length === 0) return "no models (pull one with `mesh pull org/repo:Q4_K_M`, or put GGUF files in the models dir)";
  const table = [["NAME", "SIZE", "QUANT", "STORE", "PATH", "LOADED"], ...rows.map((r) => [r.name, size(r.sizeBytes), r.quant ?? "-", r.store, r.path, r.loaded ? "yes" : "no"])];
  const widths = table[0]!.map((_, i) => Math.max(...table.map((row) => row[i]!.length)));
  return table.map((row) => row.map((cell, i) => (i === row.length - 1 ? cell : cell.padEnd(widths[i]!))).join("  ")).join("\n");
}

interface ListedModel {
  id: string;
  size?: number;
  quant?: string | null;
  store?: string;
  checkpoint?: string;
  status?: string;
}

/** The node's local models (those with a file here), from its `/v1/models`. */
export function rowsOfListing(data: readonly ListedModel[]): ModelRow[] {
  return data
    .filter((m) => typeof m.checkpoint === "string")
    .map((m) => ({ name: m.id, sizeBytes: m.size ?? 0, quant: m.quant ?? null, store: m.store ?? "models-dir", path: m.checkpoint!, loaded: m.status === "loaded" }));
}

async function modelRows(config: Config): Promise<{ from: string; rows: ModelRow[] }> {
  const node = await localNode(config);
  if (node) {
    const { url, headers } = node;
    const res = await fetch(`${url}/v1/models`, { headers, signal: AbortSignal.timeout(30_000) });
    if (!res.ok) throw new CommandError(`the node at ${url} answered ${res.status}: ${await errorText(res)}`);
    const body = (await res.json()) as { data?: ListedModel[] };
    return { from: url, rows: rowsOfListing(body.data ?? []) };
  }
  const models = await localStore(config).refresh();
  return {
    from: config.modelsDir,
    rows: models.map((m) => ({ name: m.name, sizeBytes: m.sizeBytes, quant: m.quant ?? null, store: m.store, path: m.path, loaded: false })),
  };
}

export async function showModels(config: Config, json: boolean): Promise<void> {
  const { rows } = await modelRows(config);
  console.log(json ? JSON.stringify(rows, null, 2) : formatModels(rows));
}
