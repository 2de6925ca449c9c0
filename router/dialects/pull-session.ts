/**
 * One API request's part in a pull, whatever the API's words (`PullRender`). The answer's status
 * is chosen once the pull has shown progress or ended, within a short wait: a reference the Hub
 * refuses (gated, missing, no such quant) is a plain HTTP error in the API's shape, not a 200
 * whose stream says so. After that the answer is a stream of progress lines, paced (a line per
 * file change, else at most four a second) with a keep-alive when the download is quiet, and ends
 * with the API's success or error line. A client that goes away leaves the pull (`ModelAdmin`
 * cancels it only when nobody else waits on it).
 */
import type { PulledModel, PullProgress } from "../../models/pull.ts";
import { pullErrorToAdmin, type AdminError, type ModelAdminApi } from "../../node/model-admin.ts";
import { coalesce, PROGRESS_EVERY_MS } from "./pull-events.ts";

export interface PullRender {
  /** The stream's first line, before any progress. */
  start(): string;
  progress(p: PullProgress): string;
  done(pulled: PulledModel): string;
  failed(err: AdminError): string;
  /** What a quiet stream sends to show it lives. */
  keepAlive(last: PullProgress | undefined): string;
}

export type PullStart = { settled: true; ok: true; pulled: PulledModel } | { settled: true; ok: false; error: AdminError } | { settled: false; stream: (render: PullRender) => ReadableStream<Uint8Array> };

/** How long the answer's head waits for the pull's first sign. */
const HEAD_WAIT_MS = 5_000;

const encoder = new TextEncoder();

/** Runs the pull for a client whole (no stream): its result or its error. */
export async function pullWhole(admin: ModelAdminApi, ref: string, name: string | undefined, signal: AbortSignal): Promise<{ ok: true; pulled: PulledModel } | { ok: false; error: AdminError }> {
  try {
    return { ok: true, pulled: await admin.pull(ref, name, () => undefined, signal) };
  } catch (err) {
    return { ok: false, error: pullErrorToAdmin(err) };
  }
}

export async function startPull(
  admin: ModelAdminApi,
  ref: string,
  name: string | undefined,
  requestSignal: AbortSignal,
  opts: {
    keepAliveMs: number;
    headWaitMs?: number;
  },
): Promise<PullStart> {
  const leave = new AbortController();
  const onGone = () => leave.abort();
  requestSignal.addEventListener("abort", onGone, { once: true });
  let queue: PullProgress[] = [];
  let latest: PullProgress | undefined;
  // Who waits on what: news (progress or the end), or only the end (while lines are paced).
  let onNews: (() => void) | undefined;
  let onEnd: (() => void) | undefined;
  const poke = (end: boolean) => {
    const w = end ? onEnd ?? onNews : onNews;
    onNews = onEnd = undefined;
    w?.();
  };
  /** Resolves after `ms`, or earlier on news (or only at the end, with `endOnly`). */
  const sleep = (ms: number, endOnly = false) =>
    new Promise<void>((r) => {
      const timer = setTimeout(r, Math.max(1, ms));
      const done = () => {
        clearTimeout(timer);
        r();
      };
      if (endOnly) onEnd = done;
      else onNews = done;
    });
  let outcome: { ok: true; pulled: PulledModel } | { ok: false; error: AdminError } | undefined;
  void admin
    .pull(
      ref,
      name,
      (p) => {
        queue = coalesce(queue, p);
        latest = p;
        poke(false);
      },
      leave.signal,
    )
    .then(
      (pulled) => void (outcome = { ok: true, pulled }),
      (err: unknown) => void (outcome = { ok: false, error: pullErrorToAdmin(err) }),
    )
    .finally(() => {
      requestSignal.removeEventListener("abort", onGone);
      poke(true);
    });

  // The head waits for the first progress, the end, or the deadline.
  const deadline = Date.now() + (opts.headWaitMs ?? HEAD_WAIT_MS);
  while (!outcome && queue.length === 0 && Date.now() < deadline) await sleep(deadline - Date.now());
  if (outcome && queue.length === 0) return { settled: true, ...outcome };
  if (outcome && !outcome.ok) return { settled: true, ...outcome };

  const stream = (render: PullRender) => {
    let started = false;
    let lastSent = performance.now();
    let finished = false;
    const send = (controller: ReadableStreamDefaultController<Uint8Array>, text: string) => {
      lastSent = performance.now();
      controller.enqueue(encoder.encode(text));
    };
    return new ReadableStream<Uint8Array>(
      {
        async pull(controller) {
          if (finished) return;
          if (!started) {
            started = true;
            return send(controller, render.start());
          }
          for (;;) {
            const next = queue[0];
            if (next) {
              queue = queue.slice(1);
              send(controller, render.progress(next));
              // Paced: more progress meanwhile is coalesced into one line per file.
              if (!outcome) await sleep(PROGRESS_EVERY_MS, true);
              return;
            }
            if (outcome) {
              finished = true;
              send(controller, outcome.ok ? render.done(outcome.pulled) : render.failed(outcome.error));
              controller.close();
              return;
            }
            const quiet = performance.now() - lastSent;
            if (quiet >= opts.keepAliveMs) return send(controller, render.keepAlive(latest));
            await sleep(opts.keepAliveMs - quiet);
          }
        },
        cancel() {
          finished = true;
          leave.abort();
          poke(true);
        },
      },
      { highWaterMark: 0 },
    );
  };
  return { settled: false, stream };
}
