/**
 * Small pieces every tab draws with: a status pill, a usage meter, a card with a title, an empty
 * note, and the colours series and groups are told apart by.
 */
import type { ComponentChildren } from "preact";

export type Tone = "ok" | "warn" | "err" | "info" | "muted" | "accent";

export function Pill({ tone, children, title }: { tone: Tone; children: ComponentChildren; title?: string }) {
  return (
    <span class={`pill pill-${tone}`} title={title}>
      {children}
    </span>
  );
}

/** A bar for a share of a whole (memory used of offered, bytes fetched of total). */
export function Meter({ value, max, label }: { value: number; max: number; label: string }) {
  const fraction = max > 0 ? Math.min(1, Math.max(0, value / max)) : 0;
  const tone = fraction > 0.9 ? "err" : fraction > 0.75 ? "warn" : "ok";
  return (
    <span class="meter" role="meter" aria-label={label} aria-valuemin={0} aria-valuemax={max} aria-valuenow={value}>
      <span class={`meter-fill meter-${tone}`} style={{ width: `${(fraction * 100).toFixed(1)}%` }} />
    </span>
  );
}

export function Card({ title, actions, children, class: cls }: { title: string; actions?: ComponentChildren; children: ComponentChildren; class?: string }) {
  return (
    <section class={`card ${cls ?? ""}`} aria-label={title}>
      <header class="card-head">
        <h2>{title}</h2>
        {actions}
      </header>
      {children}
    </section>
  );
}

export const Empty = ({ children }: { children: ComponentChildren }) => <p class="empty">{children}</p>;

/** Distinct hues that read on light and dark backgrounds alike. */
export const PALETTE = ["#3b82f6", "#f59e0b", "#10b981", "#ef4444", "#8b5cf6", "#06b6d4", "#ec4899", "#84cc16", "#f97316", "#64748b"] as const;

export const colorAt = (i: number): string => PALETTE[i % PALETTE.length]!;

/** A table cell that stacks under its label on narrow screens (the label comes from `data-label`). */
export function Cell({ label, class: cls, title, children }: { label: string; class?: string; title?: string; children?: ComponentChildren }) {
  return (
    <td data-label={label} title={title}>
      <div class={`cell ${cls ?? ""}`}>{children}</div>
    </td>
  );
}

/** A table whose rows become labelled cards on narrow screens (`Cell` gives each its label). */
export function Table({ columns, children }: { columns: readonly string[]; children: ComponentChildren }) {
  return (
    <div class="table-wrap">
      <table class="table stackable">
        <thead>
          <tr>
            {columns.map((c) => (
              <th scope="col" key={c}>
                {c}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>{children}</tbody>
      </table>
    </div>
  );
}
