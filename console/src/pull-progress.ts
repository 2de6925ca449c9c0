/**
 * A pull's progress as the page shows it (pure): each event of `POST /api/v1/pull` with
 * `stream: true` (Lemonade's `progress`, `complete`, `error`) folded into a fraction done and one
 * line of text. The fraction is of the whole pull when the node says its size, else of the file.
 */
import { formatBytes } from "./format.ts";

export interface PullView {
  phase: "idle" | "running" | "done" | "failed";
  /** 0..1, or null before the first progress (an indeterminate bar). */
  fraction: number | null;
  message: string;
}

export const idlePull = (): PullView => ({ phase: "idle", fraction: null, message: "" });

type Data = Record<string, unknown>;

const num = (d: Data, k: string): number | null => (typeof d[k] === "number" && Number.isFinite(d[k]) ? (d[k] as number) : null);
const str = (d: Data, k: string): string | null => (typeof d[k] === "string" ? (d[k] as string) : null);

export function pullEvent(view: PullView, event: string, data: string): PullView {
  let d: Data;
  try {
    const v: unknown = JSON.parse(data);
    d = typeof v === "object" && v !== null ? (v as Data) : {};
  } catch {
    d = {};
  }
  if (event === "error") return { phase: "failed", fraction: view.fraction, message: str(d, "error") ?? "The pull failed." };
  if (event === "complete") {
    const name = str(d, "model_name") ?? "the model";
    const had = str(d, "status") === "ok";
    return { phase: "done", fraction: 1, message: had ? `${name} was already here.` : `Pulled ${name} (${formatBytes(num(d, "total_download_size"))}).` };
  }
  if (event !== "progress") return view;
  const allTotal = num(d, "total_download_size");
  const allBytes = num(d, "cumulative_bytes_downloaded");
  const bytes = num(d, "bytes_downloaded") ?? 0;
  const total = num(d, "bytes_total") ?? 0;
  const fraction = allTotal && allBytes !== null ? allBytes / allTotal : total > 0 ? bytes / total : view.fraction;
  const file = str(d, "file") ?? "";
  const index = num(d, "file_index");
  const count = num(d, "total_files");
  const which = index !== null && count !== null ? ` (file ${index} of ${count})` : "";
  return {
    phase: "running",
    fraction: fraction === null ? null : Math.min(1, Math.max(0, fraction)),
    message: `Downloading ${file}${which}: ${formatBytes(bytes)} of ${formatBytes(total)}`,
  };
}
