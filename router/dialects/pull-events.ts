/**
 * A pull's progress in the words of each API that starts one (pure): Ollama's NDJSON status lines
 * (`pulling manifest`, `pulling <file>` with `total` and `completed`, then `success`, or a last
 * `{"error"}` line), Lemonade's server-sent events (`progress` per file, `complete`, or `error`
 * whose data carries `error`), and which progress still waits for its line (`coalesce`).
 */
import type { PulledModel, PullProgress } from "../../models/pull.ts";

export type OllamaPullLine = { status: string; digest?: string; total?: number; completed?: number } | { error: string };

export const ollamaPullStart = (): OllamaPullLine => ({ status: "pulling manifest" });

/** One file's progress. Ollama names a layer by its digest; ours are files, named by their path in the repo. */
export function ollamaPullProgress(p: PullProgress): OllamaPullLine {
  return { status: `pulling ${p.file}`, digest: p.file, total: p.total, completed: p.bytes };
}

export const ollamaPullSuccess = (): OllamaPullLine => ({ status: "success" });

export const ollamaPullError = (message: string): OllamaPullLine => ({ error: message });

export const ndjsonLine = (line: OllamaPullLine): string => `${JSON.stringify(line)}\n`;

export interface LemonadeEvent {
  event: "progress" | "complete" | "error";
  data: Record<string, string | number | boolean>;
}

/** Lemonade's `progress` event: the file being downloaded (`file_index` counts from 1, as ours does) and the whole pull's size. */
export function lemonadeProgress(p: PullProgress): LemonadeEvent {
  return {
    event: "progress",
    data: {
      file: p.file,
      file_index: p.fileIndex,
      total_files: p.fileCount,
      bytes_downloaded: p.bytes,
      bytes_previously_downloaded: 0,
      bytes_total: p.total,
      percent: p.total > 0 ? Math.floor((100 * p.bytes) / p.total) : 0,
      total_download_size: p.allTotal,
      cumulative_bytes_downloaded: p.allBytes,
    },
  };
}

/** Lemonade's `complete` event; `status: "ok"` is its word for a pull that had nothing to download. */
export function lemonadeComplete(pulled: Pick<PulledModel, "name" | "files" | "sizeBytes" | "alreadyHad">): LemonadeEvent {
  return {
    event: "complete",
    data: {
      file: "",
      file_index: pulled.files.length,
      total_files: pulled.files.length,
      bytes_downloaded: 0,
      bytes_total: 0,
      percent: 100,
      total_download_size: pulled.sizeBytes,
      model_name: pulled.name,
      ...(pulled.alreadyHad ? { status: "ok" } : {}),
    },
  };
}

export function lemonadeErrorEvent(message: string, code: string): LemonadeEvent {
  return { event: "error", data: { error: message, code } };
}

export const sseEvent = (e: LemonadeEvent): string => `event: ${e.event}\ndata: ${JSON.stringify(e.data)}\n\n`;

/** The least time between two progress lines of a stream (four a second at most): a fast download is not a flood. */
export const PROGRESS_EVERY_MS = 250;

/**
 * Progress waiting for its line: a newer one for the same file replaces the last, a new file is
 * queued behind it, so each file's last state (its end) still gets a line however lines are paced,
 * and the queue is never longer than the pull has files.
 */
export function coalesce(queue: readonly PullProgress[], p: PullProgress): PullProgress[] {
  const last = queue.at(-1);
  return last && last.file === p.file ? [...queue.slice(0, -1), p] : [...queue, p];
}
