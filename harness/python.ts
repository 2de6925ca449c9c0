/**
 * The Python client battery (tests/python/clients.py) for e2e tests: the python with the SDKs that
 * `npm test` provides (MESH_PYTHON, made by scripts/python-dev.ts), the battery's checks with why
 * one cannot run here, and one run of it against a node, its lines by check name. Where there is no
 * such python the tests skip and say why, as the browser tests do without Chromium.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { spawnChild } from "./children.ts";
import { withDeadline } from "./wait.ts";

export const BATTERY = join(import.meta.dir, "..", "tests", "python", "clients.py");

/** Why the Python client tests cannot run here, or undefined. */
export function pythonUnavailable(): string | undefined {
  const python = process.env.MESH_PYTHON;
  if (!python) return "MESH_PYTHON is unset (npm test sets it; `bun scripts/python-dev.ts` makes the venv and prints the python to set it to)";
  if (!existsSync(python)) return `MESH_PYTHON=${python} does not exist`;
  return undefined;
}

export interface BatteryCheck {
  check: string;
  /** The module its SDK is imported as. */
  sdk: string;
  /** Why its SDK cannot be imported by this python; null: it can. */
  unavailable: string | null;
}

export interface CheckResult {
  check: string;
  ok: boolean;
  detail: unknown;
  seconds: number;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** The JSON objects on the lines of `text` that start as one; anything else (a traceback) is left. */
function jsonLines(text: string): Record<string, unknown>[] {
  return text.split("\n").flatMap((line) => {
    if (!line.startsWith('{"check"')) return [];
    try {
      const parsed: unknown = JSON.parse(line);
      return isObject(parsed) ? [parsed] : [];
    } catch {
      return [];
    }
  });
}

/** The battery's checks (`--list`): it imports each SDK, so this python's gaps show here. */
export function listChecks(python: string): BatteryCheck[] {
  const run = Bun.spawnSync([python, BATTERY, "--list"], { stdout: "pipe", stderr: "pipe", timeout: 60_000 });
  if (run.exitCode !== 0) throw new Error(`${python} ${BATTERY} --list exited ${run.exitCode}: ${run.stderr.toString()}`);
  return jsonLines(run.stdout.toString()).map((o) => {
    if (typeof o.check !== "string" || typeof o.sdk !== "string" || !(o.unavailable === null || typeof o.unavailable === "string")) {
      throw new Error(`--list printed a line that is not a check: ${JSON.stringify(o)}`);
    }
    return { check: o.check, sdk: o.sdk, unavailable: o.unavailable };
  });
}

export interface BatteryRun {
  results: Map<string, CheckResult>;
  /** Everything it printed, for a failure's message. */
  output: string;
}

/** What the battery asks for: the node, its chat and embedding models, and the one that calls tools (without it the tool checks fail and say so). */
export interface BatteryTarget {
  baseUrl: string;
  model: string;
  embedModel: string;
  toolsModel?: string;
}

/** Runs every check against the node at `baseUrl` and gathers its lines; one that overruns is stopped, and what it had printed is kept. */
export async function runBattery(python: string, node: BatteryTarget, timeoutMs: number): Promise<BatteryRun> {
  const args = ["--base-url", node.baseUrl, "--model", node.model, "--embed-model", node.embedModel, ...(node.toolsModel ? ["--tools-model", node.toolsModel] : [])];
  const child = spawnChild("python-clients", [python, BATTERY, ...args], { env: { PYTHONUNBUFFERED: "1" } });
  const overran = await withDeadline(child.proc.exited, timeoutMs, `the Python client battery against ${node.baseUrl}`).then(
    () => "",
    async (err: Error) => {
      await child.stop();
      return `\n${err.message}; it was stopped`;
    },
  );
  const output = child.output() + overran;
  const results = new Map<string, CheckResult>();
  for (const o of jsonLines(output)) {
    if (typeof o.check === "string" && typeof o.ok === "boolean" && typeof o.seconds === "number") {
      results.set(o.check, { check: o.check, ok: o.ok, detail: o.detail, seconds: o.seconds });
    }
  }
  return { results, output };
}
