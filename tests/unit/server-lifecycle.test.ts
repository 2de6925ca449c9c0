/**
 * A server's lifecycle as its state machine (`pool/wrapped-server.ts`): the moves it allows, in a
 * table, and a real child process taken through them (a `sleep` stands in for llama-server, which
 * never answers /health: what is tested is the machine, not the model; tests/e2e/pool-seam.test.ts
 * runs real llama-servers through the pool).
 */
import { afterEach, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { canTransition, isLoaded, takesRequests, WrappedServer, type ServerState } from "../../pool/wrapped-server.ts";

describe("the moves a server's state may make", () => {
  test.each([
    ["starting", "ready", true],
    ["starting", "draining", true],
    ["starting", "failed", true],
    ["ready", "draining", true],
    ["ready", "stopping", true],
    ["draining", "stopping", true],
    ["draining", "failed", true],
    ["stopping", "stopped", true],
    ["draining", "ready", false],
    ["stopping", "draining", false],
    ["ready", "starting", false],
    ["stopped", "ready", false],
    ["failed", "ready", false],
    ["failed", "stopping", false],
  ] as const)("%s -> %s: %p", (from, to, ok) => expect(canTransition(from, to)).toBe(ok));

  test.each([
    ["starting", false, false],
    ["ready", true, true],
    ["draining", false, true],
    ["stopping", false, false],
    ["stopped", false, false],
    ["failed", false, false],
  ] as const)("%s: takes requests %p, loaded %p", (state: ServerState, takes, loaded) => {
    expect(takesRequests(state)).toBe(takes);
    expect(isLoaded(state)).toBe(loaded);
  });
});

describe("a real child through the machine", () => {
  const dirs: string[] = [];
  const servers: WrappedServer[] = [];
  afterEach(async () => {
    await Promise.all(servers.splice(0).map((s) => s.stop(100)));
    for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  });

  function start(argv: string[]): { server: WrappedServer; seen: ServerState[] } {
    const dir = mkdtempSync(join(tmpdir(), "mesh-lifecycle-"));
    dirs.push(dir);
    // Port 9 (discard): nothing answers /health there, so the server stays starting until told otherwise.
    const server = new WrappedServer({ model: "m", checkpoint: "m", type: "llm", devices: 1, recipe: "llamacpp", pinned: false, argv, port: 9, headers: {}, logPath: join(dir, "m.log"), maxQueue: 4 });
    servers.push(server);
    const seen: ServerState[] = [];
    server.onChange((s, why) => why === "state" && seen.push(s.state));
    return { server, seen };
  }

  test("drained while it starts, it never takes a request; its load fails once it is stopped; draining again changes nothing", async () => {
    const { server, seen } = start(["sleep", "30"]);
    const ready = server.waitReady(30_000);
    server.drain();
    expect(server.state).toBe("draining");
    expect(takesRequests(server.state)).toBe(false);
    server.drain();
    await server.stop(1_000);
    await expect(ready).rejects.toThrow("exited while loading");
    expect(seen).toEqual(["draining", "stopping", "stopped"]);
    server.drain();
    expect(server.state).toBe("stopped");
  });

  test("a child that exits on its own while draining has failed; a stop after it does nothing", async () => {
    const { server, seen } = start(["sleep", "0.2"]);
    server.drain();
    await server.exited;
    expect(server.state).toBe("failed");
    expect(server.gone.aborted).toBe(true);
    await server.stop();
    expect(seen).toEqual(["draining", "failed"]);
  });
});
