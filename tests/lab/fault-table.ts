/**
 * What each fault test saw, as rows of one table: appended as JSON lines to $MESH_FAULT_TABLE
 * (default <tmpdir>/mesh-fault-table.jsonl) so a run of many files yields one table, and logged as
 * a markdown row as each test records it. A figure that misses the goal is marked in its
 * cell (computed here, never asserted: the tests assert only liveness bounds).
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

/** The goals: the client gets an error or an answer within 10 s; service is back within 15 s where capacity remains. */
export const CLIENT_GOAL_MS = 10_000;
export const RESTORED_GOAL_MS = 15_000;

const seconds = (ms: number | null) => (ms === null ? "—" : `${(ms / 1000).toFixed(1)} s`);

/** A figure's cell, marked when it missed its goal: "12.3 s (over 10 s)". */
export function againstGoal(ms: number | null, goalMs: number): string {
  return ms !== null && ms > goalMs ? `${seconds(ms)} (over ${goalMs / 1000} s)` : seconds(ms);
}
const cell = (s: string) => s.replace(/\|/g, "\\|").replace(/\n/g, " ");

function row(o: FaultOutcome): string {
  const files = o.halfWritten.length === 0 ? "none" : o.halfWritten.map(cell).join(", ");
  return `| ${cell(o.fault)} | ${cell(o.client)} | ${againstGoal(o.clientMs, CLIENT_GOAL_MS)} | ${againstGoal(o.restoredMs, RESTORED_GOAL_MS)} | ${files} | ${o.orphans} |`;
}

export function recordFault(o: FaultOutcome): void {
  appendFileSync(faultTablePath(), `${JSON.stringify(o)}\n`);
  console.log(row(o));
}

export function faultTable(rows: FaultOutcome[]): string {
  return [HEADER, ...rows.map(row)].join("\n");
}
