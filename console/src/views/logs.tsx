/**
 * The Logs tab: this node's recent lines as they stream in, filtered by level (that level and
 * above) and by text. It follows the newest line while the view is scrolled to the bottom, and
 * stays where the reader left it otherwise.
 */
import { useLayoutEffect, useRef, useState } from "preact/hooks";
import type { LogLevel, LogLine } from "../../protocol.ts";
import { formatClock } from "../format.ts";
import { fieldsText, filterLogs, LEVELS } from "../log-filter.ts";
import { Card } from "./parts.tsx";

export function LogsView({ logs }: { logs: readonly LogLine[] }) {
  const [level, setLevel] = useState<LogLevel>("debug");
  const [text, setText] = useState("");
  const box = useRef<HTMLDivElement>(null);
  const pinned = useRef(true);
  const shown = filterLogs(logs, level, text);

  useLayoutEffect(() => {
    const el = box.current;
    if (el && pinned.current) el.scrollTop = el.scrollHeight;
  }, [shown.length, logs.at(-1)?.seq]);

  return (
    <Card
      title="Logs"
      class="logs-card"
      actions={
        <div class="log-controls">
          <label for="log-level">Level</label>
          <select id="log-level" data-testid="log-level" value={level} onChange={(e) => setLevel(e.currentTarget.value as LogLevel)}>
            {LEVELS.map((l) => (
              <option key={l} value={l}>
                {l} and above
              </option>
            ))}
          </select>
          <label for="log-text" class="visually-hidden">
            Filter text
          </label>
          <input id="log-text" type="search" placeholder="Filter" value={text} onInput={(e) => setText(e.currentTarget.value)} />
        </div>
      }
    >
      <div
        ref={box}
        class="log-box mono"
        tabIndex={0}
        role="log"
        aria-label="Log lines"
        onScroll={(e) => {
          const el = e.currentTarget;
          pinned.current = el.scrollHeight - el.scrollTop - el.clientHeight < 24;
        }}
      >
        {shown.length === 0 && <p class="empty">No lines at this level yet.</p>}
        {shown.map((l) => (
          <div key={l.seq} class={`log-line level-${l.level}`} data-testid="log-line" data-level={l.level}>
            <span class="log-time">{formatClock(l.at)}</span>
            <span class="log-level">{l.level}</span>
            <span class="log-msg">{l.msg}</span>
            {Object.keys(l.fields).length > 0 && <span class="log-fields">{fieldsText(l.fields)}</span>}
          </div>
        ))}
      </div>
      <p class="muted small">
        {shown.length} of {logs.length} recent lines
      </p>
    </Card>
  );
}
