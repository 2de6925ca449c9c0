/** What every bench shares: percentiles of samples and a Markdown table on stdout. */

/** The p-th percentile (nearest rank) of `xs`. */
export function pct(xs: readonly number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
}

/** Prints a Markdown table with padded columns, all aligned left or all right. */
export function printTable(header: readonly string[], rows: readonly (readonly string[])[], align: "left" | "right" = "left"): void {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (r: readonly string[]) => `| ${r.map((c, i) => (align === "left" ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join(" | ")} |`;
  console.log(line(header));
  console.log(`|${widths.map((w) => (align === "left" ? "-".repeat(w + 2) : `${"-".repeat(w + 1)}:`)).join("|")}|`);
  for (const r of rows) console.log(line(r));
}
