/**
 * What each fault test saw, as rows of one table: appended as JSON lines to $MESH_FAULT_TABLE
 * (default <tmpdir>/mesh-fault-table.jsonl) so a run of many files yields one table, and logged as
 * a markdown row as each test records it.
 */
import { appendFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export interface FaultOutcome {
  /** e.g. "kill -9 of the host, mid-stream" */
  fault: string;
  /** what the client saw: "503 in 0.4 s", "answer (retried) in 2.1 s", "stream cut, error event" */
  client: string;
  /** time to that error/answer */
  clientMs: number | null;
  /** time until the model answered again (null: not applicable / no capacity left) */
  restoredMs: number | null;
  /** files left half-written in a models dir (should be empty) */
  halfWritten: string[];
  /** processes left (should be 0) */
  orphans: number;
}

export const faultTablePath = (): string => process.env.MESH_FAULT_TABLE ?? join(tmpdir(), "mesh-fault-table.jsonl");

const HEADER = "| fault | client saw | to client | service restored | half-written files | orphans |\n|---|---|---|---|---|---|";

const seconds = (ms: number | null) => (ms === null ? "—" : `${(ms / 1000).toFixed(1)} s`);
const cell = (s: string) => s.replace(/\|/g, "\\|").replace(/\n/g, " ");

function row(o: FaultOutcome): string {
  const files = o.halfWritten.length === 0 ? "none" : o.halfWritten.map(cell).join(", ");
  return `| ${cell(o.fault)} | ${cell(o.client)} | ${seconds(o.clientMs)} | ${seconds(o.restoredMs)} | ${files} | ${o.orphans} |`;
}

export function recordFault(o: FaultOutcome): void {
  appendFileSync(faultTablePath(), `${JSON.stringify(o)}\n`);
  console.log(row(o));
}

export function faultTable(rows: FaultOutcome[]): string {
  return [HEADER, ...rows.map(row)].join("\n");
}
