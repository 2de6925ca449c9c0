/**
 * The page's one live connection: `GET /api/console/events`, read with fetch so it carries the API
 * key. It hands each event on as a store action and says how it stands: `connecting` until the
 * node's `hello`, `live` after, `unauthorized` on a 401 (it then waits for a new key). When the
 * stream ends, fails or goes quiet for too long it reconnects after 1 s, doubling to 10 s; a
 * `hello` resets the wait. `stop` ends it all: the request, the timers, the key listener.
 */
import { apiFetch, ensureOk, onKeyChange, Unauthorized } from "./api.ts";
import { readSseBody } from "./sse.ts";
import { toAction, type ConsoleAction } from "./store.ts";

export type LiveState = "connecting" | "live" | "unauthorized";

export const EVENTS_PATH = "/api/console/events";
export const RETRY_FIRST_MS = 1_000;
export const RETRY_MAX_MS = 10_000;
/** The node sends a sample every 2 s and keep-alives when idle: this long without a byte means the stream is dead. */
export const QUIET_LIMIT_MS = 30_000;

export const nextDelay = (ms: number): number => Math.min(ms * 2, RETRY_MAX_MS);

export interface LiveHandlers {
  onAction: (a: ConsoleAction) => void;
  onState: (s: LiveState) => void;
}

export function startLive(h: LiveHandlers): () => void {
  let stopped = false;
  let request: AbortController | null = null;
  let wake: (() => void) | null = null;
  const unKey = onKeyChange(() => wake?.());

  /** Resolves after `ms`, or at once on `stop` / a new key (ms = Infinity waits for those only). */
  const pause = (ms: number) =>
    new Promise<void>((resolve) => {
      const timer = Number.isFinite(ms) ? setTimeout(done, ms) : undefined;
      function done() {
        clearTimeout(timer);
        wake = null;
        resolve();
      }
      wake = done;
    });

  async function once(resetDelay: () => void): Promise<"ended" | "unauthorized"> {
    const ctrl = new AbortController();
    request = ctrl;
    let lastByte = Date.now();
    const watchdog = setInterval(() => {
      if (Date.now() - lastByte > QUIET_LIMIT_MS) ctrl.abort();
    }, 5_000);
    try {
      const res = await ensureOk(await apiFetch(EVENTS_PATH, { signal: ctrl.signal }));
      if (!res.body) return "ended";
      await readSseBody(
        res.body,
        (m) => {
          const action = toAction(m.event, m.data);
          if (!action) return;
          if (action.type === "hello") {
            resetDelay();
            h.onState("live");
          }
          h.onAction(action);
        },
        () => {
          lastByte = Date.now();
        },
      );
      return "ended";
    } catch (err) {
      return err instanceof Unauthorized ? "unauthorized" : "ended";
    } finally {
      clearInterval(watchdog);
      ctrl.abort();
      request = null;
    }
  }

  void (async () => {
    let delay = RETRY_FIRST_MS;
    while (!stopped) {
      h.onState("connecting");
      const how = await once(() => {
        delay = RETRY_FIRST_MS;
      });
      if (stopped) break;
      if (how === "unauthorized") {
        h.onState("unauthorized");
        await pause(Infinity);
        delay = RETRY_FIRST_MS;
        continue;
      }
      h.onState("connecting");
      await pause(delay);
      delay = nextDelay(delay);
    }
  })();

  return () => {
    stopped = true;
    unKey();
    request?.abort();
    wake?.();
  };
}
