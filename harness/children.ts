/**
 * Child processes started by tests. Every child is tracked from the moment it is spawned and killed
 * by `killAllChildren()` (each e2e file calls it in afterAll) or, at the latest, when the test
 * process exits, so a failing test never leaves a llama-server or node behind. Each child leads its
 * own process group, and cleanup kills the whole group. The rpc-server and llama-servers a node
 * started run in groups of their own (out of a terminal's Ctrl-C) and die with the node by the
 * parent-death signal it gives them (`pool/child-process.ts`), even when the test killed the node
 * itself with SIGKILL; where that signal is not to be had they stay in its group, which cleanup kills.
 */
import type { Subprocess } from "bun";
import { appendFileSync } from "node:fs";
import { join } from "node:path";
import { withDeadline } from "./wait.ts";

/**
 * Where the test runner (`scripts/test.ts`) wants every child's output kept as well, one file per
 * child, so a failed file's nodes can be read after the fact (it prints their tails, then keeps or
 * removes the folder); unset, output lives only in memory.
 */
const CHILD_LOGS = process.env.MESH_TEST_CHILD_LOGS;

export interface Child {
  proc: Subprocess<"ignore", "pipe", "pipe">;
  name: string;
  /** Everything the child wrote to stdout and stderr so far, interleaved by arrival. */
  output(): string;
  /** Resolves with the first match of `pattern` in the output, waiting up to the deadline. */
  waitForOutput(pattern: RegExp, timeoutMs?: number): Promise<RegExpMatchArray>;
  /** SIGTERM, then SIGKILL if it is still there after `graceMs`; resolves with the exit code. */
  stop(graceMs?: number): Promise<number | null>;
}

const live = new Set<Subprocess>();
/** Process groups of every child ever started, cleaned when the child goes and again at exit. */
const groups = new Set<number>();

function killGroup(pid: number): void {
  try {
    process.kill(-pid, "SIGKILL");
  } catch {
    // the group is empty already
  }
}

process.on("exit", () => {
  for (const p of live) p.kill("SIGKILL");
  for (const pid of groups) killGroup(pid);
});

async function pump(stream: ReadableStream<Uint8Array>, onText: (t: string) => void): Promise<void> {
  const decoder = new TextDecoder();
  for await (const chunk of stream) onText(decoder.decode(chunk, { stream: true }));
}

/** An environment without the variables a test unset (given as undefined): an empty value is not the same to every program. */
function definedOnly(env: Record<string, string | undefined>): Record<string, string> {
  return Object.fromEntries(Object.entries(env).filter((e): e is [string, string] => e[1] !== undefined));
}

export function spawnChild(name: string, argv: string[], opts: { env?: Record<string, string | undefined>; cwd?: string } = {}): Child {
  const proc = Bun.spawn(argv, { stdin: "ignore", stdout: "pipe", stderr: "pipe", env: definedOnly({ ...process.env, ...opts.env }), cwd: opts.cwd, detached: true });
  live.add(proc);
  groups.add(proc.pid);
  void proc.exited.then(() => live.delete(proc));
  let text = "";
  const waiters = new Set<() => void>();
  const logFile = CHILD_LOGS ? join(CHILD_LOGS, `${name.replace(/[^\w.-]+/g, "_")}-${proc.pid}.log`) : undefined;
  const onText = (t: string) => {
    text += t;
    if (logFile) appendFileSync(logFile, t);
    for (const w of waiters) w();
  };
  void pump(proc.stdout, onText);
  void pump(proc.stderr, onText);

  const waitForOutput = (pattern: RegExp, timeoutMs = 30_000) => {
    const found = new Promise<RegExpMatchArray>((resolve, reject) => {
      const check = () => {
        const m = text.match(pattern);
        if (m) {
          waiters.delete(check);
          resolve(m);
        }
      };
      waiters.add(check);
      check();
      void proc.exited.then((code) => {
        // Let the pumps deliver the last bytes before deciding the pattern never came.
        setTimeout(() => {
          check();
          if (waiters.has(check)) {
            waiters.delete(check);
            reject(new Error(`${name} exited (${code}) before printing ${pattern}:\n${text.slice(-3000)}`));
          }
        }, 50);
      });
    });
    return withDeadline(found, timeoutMs, `${name} to print ${pattern}; output so far:\n${text.slice(-3000)}`);
  };

  const stop = async (graceMs = 10_000) => {
    if (proc.exitCode !== null || proc.signalCode !== null) {
      killGroup(proc.pid);
      return proc.exitCode;
    }
    proc.kill("SIGTERM");
    const timer = setTimeout(() => proc.kill("SIGKILL"), graceMs);
    const code = await proc.exited;
    clearTimeout(timer);
    // Whatever the child left behind in its group (it should have stopped its own children).
    killGroup(proc.pid);
    return code;
  };

  return { proc, name, output: () => text, waitForOutput, stop };
}

/** Kills every child still running and waits until they are gone. */
export async function killAllChildren(): Promise<void> {
  const procs = [...live];
  for (const p of procs) p.kill("SIGKILL");
  await Promise.all(procs.map((p) => p.exited));
  for (const pid of groups) killGroup(pid);
  groups.clear();
}
