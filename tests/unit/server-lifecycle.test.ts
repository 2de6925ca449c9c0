/**
 * A server's lifecycle as its state machine (`pool/wrapped-server.ts`): the moves it allows, in a
 * table, and a real child process taken through them (a `sleep` stands in for a llama-server that
 * never answers /health, a Bun one-liner for one that answers it: what is tested is the machine,
 * not the model; tests/e2e/pool-seam.test.ts runs real llama-servers through the pool).
 */
import { afterEach, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort } from "../../pool/free-port.ts";
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

  // Port 9 (discard) by default: nothing answers /health there, so the server stays starting until told otherwise.
  function start(argv: string[], port = 9): { server: WrappedServer; seen: ServerState[] } {
    const dir = mkdtempSync(join(tmpdir(), "mesh-lifecycle-"));
    dirs.push(dir);
    const server = new WrappedServer({ model: "m", checkpoint: "m", type: "llm", devices: 1, recipe: "llamacpp", pinned: false, argv, port, headers: {}, logPath: join(dir, "m.log"), maxQueue: 4 });
    servers.push(server);
    const seen: ServerState[] = [];
    server.onChange((s, why) => why === "state" && seen.push(s.state));
    return { server, seen };
  }

  test("drained while it starts, it takes no new request; its load fails once it is stopped; draining again changes nothing", async () => {
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

  // An unload waits behind the load it drained (one queue): were the load to wait for the unload's
  // stop, neither would end.
  test("drained while it starts, it still comes up, draining, for what waited for its load", async () => {
    const port = freePort();
    const { server, seen } = start([process.execPath, "-e", `Bun.serve({ hostname: "127.0.0.1", port: ${port}, fetch: () => new Response("{}") }); setInterval(() => {}, 1000)`], port);
    server.drain();
    await server.waitReady(30_000);
    expect(server.state).toBe("draining");
    expect(isLoaded(server.state)).toBe(true);
    await server.stop(1_000);
    expect(seen).toEqual(["draining", "stopping", "stopped"]);
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

  // Issue 43: a member's cache restored into a slot for one request is in no other request's way to llama-server.
  test("a fence keeps every request but its holder's out until it is lifted; a second waits for the first; a waiter's abort rejects", async () => {
    const { server } = start(["sleep", "30"]);
    const first = Promise.withResolvers<void>();
    const { held } = await server.fence(first.promise);
    await server.pastFence(held, AbortSignal.timeout(1_000));
    let passed = false;
    const other = server.pastFence(undefined, new AbortController().signal).then(() => void (passed = true));
    const second = Promise.withResolvers<void>();
    let secondUp = false;
    const secondFence = server.fence(second.promise).then((f) => ((secondUp = true), f));
    const gaveUp = new AbortController();
    const aborted = server.pastFence(undefined, gaveUp.signal);
    gaveUp.abort(new Error("the client went away"));
    await expect(aborted).rejects.toThrow("the client went away");
    // Every promise settled that could (no timer is involved): still held.
    await new Promise((resolve) => setImmediate(resolve));
    expect(passed).toBe(false);
    expect(secondUp).toBe(false);
    first.resolve();
    const { held: next } = await secondFence;
    await server.pastFence(next, AbortSignal.timeout(1_000));
    second.resolve();
    await other;
    expect(passed).toBe(true);
  });
});
