import { describe, expect, test } from "bun:test";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { catalog, type NodeView } from "../../placement/catalog.ts";
import type { Log } from "../../base/log.ts";
import type { ModelInfo } from "../../models/model-store.ts";
import { copyGoes, ReplicaKeeper, type ReplicaKeeperOptions } from "../../node/replica-keeper.ts";
import { announcedDemandOf, type ViewPeers } from "../../node/mesh-view.ts";

const GB = 1e9;
const file = join(mkdtempSync(join(tmpdir(), "replica-keeper-")), "m.gguf");
writeFileSync(file, "x");
const info = { name: "m", type: "llm", files: [file], sizeBytes: 5 * GB } as unknown as ModelInfo;
const lines: string[] = [];
const line = (m: string, fields?: object) => void lines.push(`${m} ${JSON.stringify(fields ?? {})}`);
const log = { info: line, warn: line, error: line, debug: () => undefined } as unknown as Log;

/**
 * Node "a" hosts m and is pressed; this node is "b", a standby with the file (in m's group unless
 * `b.assigned` says otherwise; without the file when `b.onDisk` is false: it copies it from "a").
 */
function setup(over: Partial<ReplicaKeeperOptions> = {}, load: () => Promise<unknown> = async () => undefined, b: { assigned?: string; onDisk?: boolean } = {}) {
  const loaded = new Map<string, { model: string; type: string; lastUse: number; busy: boolean }>();
  const calls: string[] = [];
  let keeper: ReplicaKeeper;
  let onDisk = b.onDisk ?? true;
  const assigned = "assigned" in b ? b.assigned : "m";
  const views = (): NodeView[] => [
    { nodeId: "b", vramBytes: 16 * GB, modelsOnDisk: onDisk ? [{ name: "m", sizeBytes: 5 * GB, needBytes: 6 * GB, identity: "content-of-m" }] : [], assigned, ready: [...loaded.keys()], idle: [], ...keeper.announced() },
    { nodeId: "a", vramBytes: 24 * GB, modelsOnDisk: [{ name: "m", sizeBytes: 5 * GB, needBytes: 6 * GB, identity: "content-of-m" }], assigned: "m", hosting: true, ready: ["m"], idle: [] },
  ];
  const pool = {
    limit: 1,
    loaded: () => [...loaded.values()],
    server: (model: string) => loaded.get(model),
    load: async (m: ModelInfo) => {
      calls.push(`load ${m.name}`);
      await load();
      loaded.set(m.name, { model: m.name, type: "llm", lastUse: Date.now(), busy: false });
    },
    unload: async (model: string) => {
      calls.push(`unload ${model}`);
      loaded.delete(model);
      keeper.onEvict(model, "unload");
      return [model];
    },
  };
  keeper = new ReplicaKeeper({
    enabled: true,
    idleMs: 60_000,
    selfId: () => "b",
    views,
    catalog: () => catalog(views()),
    demandOf: (id) => (id === "a" ? [{ model: "m", slots: 1, inFlight: 1, queued: 3, waitMs: 800 }] : []),
    pool: pool as unknown as ReplicaKeeperOptions["pool"],
    store: { list: () => (onDisk ? [info] : []), refresh: async () => (onDisk ? [info] : []) },
    copy: async () => {
      calls.push("copy");
      onDisk = true;
    },
    remove: async (model) => {
      calls.push(`remove ${model}`);
      onDisk = false;
    },
    changed: () => void calls.push("changed"),
    log,
    ...over,
  });
  return { keeper, calls, loaded };
}

const settle = () => new Promise((r) => setTimeout(r, 5));

describe("ReplicaKeeper", () => {
  test("picked by the rule: loads the model alone, announces it, and does not load it twice", async () => {
    const { keeper, calls } = setup();
    keeper.tick();
    expect(keeper.announced()).toEqual({ replicating: ["m"], takesReplicas: true });
    keeper.tick();
    await settle();
    expect(calls.filter((c) => c.startsWith("load"))).toEqual(["load m"]);
    expect(lines).toContainEqual(expect.stringContaining("replica ready"));
  });

  test("--replicas off: takes none and says so", () => {
    const { keeper, calls } = setup({ enabled: false });
    keeper.tick();
    expect(calls).toEqual([]);
    expect(keeper.announced()).toEqual({ replicating: [], takesReplicas: false });
  });

  test("a failed load is forgotten and the model paused here: the next tick does not try again", async () => {
    const { keeper, calls } = setup({}, async () => {
      throw new Error("out of memory");
    });
    keeper.tick();
    await settle();
    expect(keeper.announced().replicating).toEqual([]);
    keeper.tick();
    await settle();
    expect(calls.filter((c) => c.startsWith("load"))).toEqual(["load m"]);
    expect(lines).toContainEqual(expect.stringContaining("could not add a replica; not trying it here again for 60 s"));
  });

  test("idle: unloaded, its unload is the keeper's (the group's rules are not told), and not added again at once", async () => {
    const { keeper, calls, loaded } = setup({ idleMs: 1 });
    keeper.tick();
    await settle();
    loaded.get("m")!.lastUse = Date.now() - 1_000;
    keeper.tick();
    await settle();
    expect(calls).toContain("unload m");
    expect(keeper.announced().replicating).toEqual([]);
    keeper.tick();
    await settle();
    expect(calls.filter((c) => c.startsWith("load"))).toEqual(["load m"]);
  });

  test("the pool unloads it for another model: no longer listed; onEvict tells the caller it was a replica", async () => {
    const { keeper, loaded } = setup();
    keeper.tick();
    await settle();
    loaded.delete("m");
    expect(keeper.onEvict("m", "lru")).toBe(true);
    expect(keeper.onEvict("other", "lru")).toBe(false);
    expect(keeper.announced().replicating).toEqual([]);
  });

  test("its server gone without an unload (the process died): no longer listed (it would read as one on its way), and not added here again at once", async () => {
    const { keeper, loaded } = setup();
    keeper.tick();
    await settle();
    loaded.delete("m");
    keeper.tick();
    expect(lines).toContainEqual(expect.stringContaining("a replica's server is gone"));
    expect(keeper.announced().replicating).toEqual([]);
    keeper.tick();
    expect(keeper.announced().replicating).toEqual([]);
  });

  test("the pool's place for its type is taken: no other model is evicted for a replica", async () => {
    const { keeper, calls, loaded } = setup();
    loaded.set("own", { model: "own", type: "llm", lastUse: Date.now(), busy: false });
    keeper.tick();
    await settle();
    expect(calls.filter((c) => c.startsWith("load"))).toEqual([]);
    expect(lines).toContainEqual(expect.stringContaining("a replica takes no other model's place"));
  });

  describe("nothing it starts can end the node (Bun exits on an unhandled rejection)", () => {
    test("a load failing with a non-Error is logged as one line and paused", async () => {
      const { keeper } = setup({}, () => Promise.reject("no memory left"));
      keeper.tick();
      await settle();
      expect(keeper.announced().replicating).toEqual([]);
      expect(lines).toContainEqual(expect.stringContaining('could not add a replica; not trying it here again for 60 s {"model":"m","error":"no memory left"}'));
    });
    test("a throw while telling the node of a failed add is caught and logged", async () => {
      let fail = false;
      const { keeper } = setup(
        {
          changed: () => {
            if (fail) throw new Error("announce broke");
          },
        },
        async () => {
          fail = true;
          throw new Error("out of memory");
        },
      );
      keeper.tick();
      await settle();
      expect(lines).toContainEqual(expect.stringContaining('replicas: adding one failed {"model":"m","error":"announce broke"}'));
    });
    test("a throw inside a tick is logged, not thrown to its timer", () => {
      const { keeper } = setup({
        views: () => {
          throw new TypeError("views broke");
        },
      });
      expect(() => keeper.tick()).not.toThrow();
      expect(lines).toContainEqual(expect.stringContaining('replicas: could not work the rule out this tick {"error":"views broke"}'));
    });
  });
});

describe("announcedDemandOf: the demand the rule reads is the one peers have, ours included", () => {
  const sent = [{ model: "m", slots: 1, inFlight: 1, queued: 2, waitMs: 900 }];
  const peerDemand = [{ model: "k", slots: 2, inFlight: 0, queued: 0, waitMs: 0 }];
  const membership = (lastSent: { demand?: unknown } | undefined) => Object.assign(new Map([["p", { announcement: { demand: peerDemand } }]]), { lastSent }) as unknown as ViewPeers;
  test.each<[string, string, { demand?: unknown } | undefined, unknown]>([
    ["ours: what our last announcement carried, not the live queue", "self", { demand: sent }, sent],
    ["ours before any announcement: none (peers know none either)", "self", undefined, undefined],
    ["a peer's: its announcement's", "p", { demand: sent }, peerDemand],
    ["an unknown node: none", "q", { demand: sent }, undefined],
  ])("%s", (_, id, last, want) => expect(announcedDemandOf(id, "self", membership(last))).toEqual(want));
});

describe("the files a replica copied go with it", () => {
  test.each<[string, Parameters<typeof copyGoes>[1], boolean]>([
    ["copied here, the node wants it for nothing else: deleted", { copiedHere: true, assigned: "other", loaded: false }, true],
    ["on disk before the replica: kept", { copiedHere: false, assigned: "other", loaded: false }, false],
    ["the node's own group's model now: kept", { copiedHere: true, assigned: "m", loaded: false }, false],
    ["loaded here otherwise (pinned, a request): kept", { copiedHere: true, assigned: undefined, loaded: true }, false],
  ])("%s", (_, facts, want) => expect(copyGoes("m", facts)).toBe(want));

  /** Idles out the replica `setup` gives. */
  async function idleOut(k: ReturnType<typeof setup>) {
    k.keeper.tick();
    await settle();
    k.loaded.get("m")!.lastUse = Date.now() - 1_000;
    k.keeper.tick();
    await settle();
  }
  test("a replica that copied the file: released for idleness, its copy is deleted", async () => {
    const k = setup({ idleMs: 1 }, undefined, { assigned: undefined, onDisk: false });
    await idleOut(k);
    expect(k.calls).toEqual(expect.arrayContaining(["copy", "load m", "unload m", "remove m"]));
    expect(lines).toContainEqual(expect.stringContaining("deleted the files copied for a replica that is gone"));
  });
  test("a replica whose file was on disk before: nothing deleted", async () => {
    const k = setup({ idleMs: 1 }, undefined, { assigned: undefined });
    await idleOut(k);
    expect(k.calls).toContain("unload m");
    expect(k.calls.filter((c) => c.startsWith("remove") || c === "copy")).toEqual([]);
  });
  test("a copy the node's own group wants (a spare of m's group): kept", async () => {
    const k = setup({ idleMs: 1 }, undefined, { onDisk: false });
    await idleOut(k);
    expect(k.calls).toEqual(expect.arrayContaining(["copy", "unload m"]));
    expect(k.calls.filter((c) => c.startsWith("remove"))).toEqual([]);
  });
  test("a copy whose load failed: deleted", async () => {
    const k = setup({}, () => Promise.reject(new Error("out of memory")), { assigned: undefined, onDisk: false });
    k.keeper.tick();
    await settle();
    expect(k.calls).toEqual(expect.arrayContaining(["copy", "remove m"]));
  });
});
