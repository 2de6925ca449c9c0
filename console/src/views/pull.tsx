/**
 * Pull by reference: the form sends `POST /api/v1/pull` with `stream: true` and shows its progress
 * events as a bar and one line, then the outcome. The catalog row appears by itself when the node's
 * state changes. A pull still running when the page goes away is cancelled with it.
 */
import { useEffect, useRef, useState } from "preact/hooks";
import { describeError } from "../api.ts";
import { idlePull, pullEvent, type PullView } from "../pull-progress.ts";
import { postSse } from "../stream.ts";
import { Card } from "./parts.tsx";

export function PullForm() {
  const [ref, setRef] = useState("");
  const [view, setView] = useState<PullView>(idlePull);
  const ctrl = useRef<AbortController | null>(null);
  useEffect(() => () => ctrl.current?.abort(), []);

  async function submit(e: Event) {
    e.preventDefault();
    const name = ref.trim();
    if (!name || view.phase === "running") return;
    const c = new AbortController();
    ctrl.current = c;
    let current: PullView = { phase: "running", fraction: null, message: `Starting the pull of ${name}…` };
    setView(current);
    try {
      await postSse("/api/v1/pull", { model_name: name, stream: true }, c.signal, () => undefined, (m) => {
        current = pullEvent(current, m.event, m.data);
        setView(current);
      });
      if (current.phase === "running") setView({ ...current, phase: "failed", message: "The pull ended without saying it was done." });
    } catch (err) {
      setView({ phase: "failed", fraction: current.fraction, message: describeError(err) });
    } finally {
      if (ctrl.current === c) ctrl.current = null;
    }
  }

  const running = view.phase === "running";
  return (
    <Card title="Pull a model">
      <form class="pull-form" data-testid="pull-form" onSubmit={(e) => void submit(e)}>
        <label for="pull-ref">Reference</label>
        <div class="row">
          <input
            id="pull-ref"
            data-testid="pull-ref"
            type="text"
            placeholder="owner/repo:Q4_K_M or a URL"
            autocomplete="off"
            spellcheck={false}
            value={ref}
            onInput={(e) => setRef(e.currentTarget.value)}
          />
          <button type="submit" class="btn btn-primary" data-testid="pull-submit" disabled={running || ref.trim() === ""}>
            {running ? "Pulling…" : "Pull"}
          </button>
          {running && (
            <button type="button" class="btn" onClick={() => ctrl.current?.abort()}>
              Cancel
            </button>
          )}
        </div>
        {view.phase !== "idle" && (
          <div class="pull-status">
            <progress
              data-testid="pull-progress"
              max={100}
              value={view.fraction === null ? undefined : Math.round(view.fraction * 100)}
              aria-label="pull progress"
              aria-valuenow={view.fraction === null ? undefined : Math.round(view.fraction * 100)}
            />
            <p data-testid="pull-message" class={view.phase === "failed" ? "err-text" : "muted"} role="status">
              {view.message}
            </p>
          </div>
        )}
      </form>
    </Card>
  );
}
