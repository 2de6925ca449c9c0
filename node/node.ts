/**
 * Everything a node runs besides its HTTP API: the model store, the pool of llama-servers, the
 * rpc-server it offers the mesh, its place in the mesh, the RPC tunnels to its peers, and its part
 * in serving the mesh's models (which group it is in, what it hosts, the files it fetches).
 * `createNode` builds each part once, with the node's mesh identity and the parts it reads: the
 * peer table the membership will keep, the store, the rpc-server and tunnels, the fetcher and our
 * content identities, the group's state, the mesh's view and the splits (which the pool asks before
 * a load), the pool, then the group and the replicas that change that state, and the router;
 * `start` brings the mesh up over the same table. Reports that go up that order are `Signal`s the
 * later parts subscribe to: our announcement moved, something changed, the pool unloaded a model.
 */
import { existsSync } from "node:fs";
import { homedir, totalmem } from "node:os";
import { join } from "node:path";
import type { Config } from "../config/config.ts";
import type { LlamaBinaries } from "../llama/binaries.ts";
import type { LlamaDevice } from "../llama/devices.ts";
import { LLAMA_SOURCE } from "../llama/pin.ts";
import type { Log } from "../base/log.ts";
import { serveHttp } from "../mesh/http-stream.ts";
import { MemberStreamCap } from "../mesh/member-stream-cap.ts";
import { memberMayRequest } from "../mesh/member-routes.ts";
import { startMesh, type MeshIdentity, type MeshNode } from "./mesh-node.ts";
import type { MeshStatus } from "../mesh/status.ts";
import { catalogDigest } from "../placement/catalog-digest.ts";
import { StreamKind } from "../streams/wire.ts";
import { ModelAdmin } from "./model-admin.ts";
import { hubFromEnv, isPath, resolveModelArgs } from "./model-arg.ts";
import { showFirstTokens } from "./first-tokens.ts";
import { ModelStore } from "../models/model-store.ts";
import { modelStoreRoots, type StoreRoot } from "../models/stores/stores.ts";
import { serveModelStream } from "../models/peer-transfer.ts";
import type { Stream } from "../streams/stream.ts";
import { capLogsEvery } from "../pool/log-files.ts";
import { Pool } from "../pool/pool.ts";
import { LoadedServers } from "../pool/loaded-servers.ts";
import type { EvictionCause } from "../pool/pool-types.ts";
import { RpcServerChild } from "../pool/rpc-server.ts";
import { connectDirect, directTarget, startDirectServer } from "../tunnel/direct.ts";
import type { DirectPurpose } from "../tunnel/direct-auth.ts";
import { peerStreamOpener } from "./peer-streams.ts";
import { makeDirectIdentity } from "../tunnel/direct-identity.ts";
import { Tunnels } from "../tunnel/tunnels.ts";
import { ZeroTransfer } from "../tunnel/zero-transfer.ts";
import { ModelIdentities } from "../models/model-identities.ts";
import { SLOT_CACHE_DIR, SlotCache } from "../pool/slot-cache.ts";
import { ModelFetcher } from "./model-fetcher.ts";
import { nodeReplicaKeeper, ReplicaHolds } from "./replica-keeper.ts";
import { nodeCpuShare } from "./cpu-share.ts";
import { needAt } from "./model-fields.ts";
import { ModelAnnouncer } from "./model-announcer.ts";
import { nodeAnnouncement } from "./node-announcement.ts";
import { MeshViewCache, type MeshView } from "./mesh-view.ts";
import { SplitPlanner } from "./split-planner.ts";
import { GroupReconciler } from "./group-reconciler.ts";
import { GroupState } from "./group-state.ts";
import { MeshForwarder } from "./mesh-forwarder.ts";
import { MeshRouter } from "./mesh-router.ts";
import { nodeKv, type NodeKv } from "./kv-parts.ts";
import { nodeProtocols } from "./peer-protocols.ts";
import { counts } from "../placement/trust.ts";
import { PeerTable } from "../mesh/peer-table.ts";
import { Signal } from "../base/signal.ts";

/** The other tools' stores a node with these settings serves from, in naming order (none with --scan-model-stores off). */
export function storeRoots(config: Pick<Config, "scanModelStores" | "modelStores">): StoreRoot[] {
  return config.scanModelStores === "on" ? modelStoreRoots(process.env, homedir(), config.modelStores, process.platform) : [];
}

const LOG_CAP_EVERY_MS = 60_000;
/** How long a node started with --join waits to hear from its mesh before it downloads a model nobody it knows has. */
const JOIN_GRACE_MS = 60_000;
/**
 * How long a forwarded request waits for the answer's head beyond --load-timeout: the model's load,
 * and a non-streamed answer's whole generation (OpenAI clients wait 10 minutes by default).
 */
const FORWARD_ANSWER_MS = 10 * 60_000;

export interface NodeParts {
  store: ModelStore;
  pool: Pool;
  tunnels: Tunnels;
  zeroTransfer: ZeroTransfer;
  rpc: RpcServerChild;
  mesh: () => MeshNode | undefined;
  /** Where each request goes: this node's pool or the node hosting its model (the router's `MeshRouting`). */
  routing: MeshRouter;
  /** The mesh as this node sees it (what members announce, the catalog, what this node saw itself). */
  view: MeshView;
  /** This node's group: the model it is assigned, whether it hosts it (`status` for the API). */
  group: GroupReconciler;
  /** Pulls and deletes models on this node's disk (the API's and the CLI's). */
  admin: ModelAdmin;
  /** Conversations' KV caches between members: fetched when one moves here, given to members that ask. */
  kv: NodeKv;
  meshStatus: () => MeshStatus;
  /**
   * Starts the mesh (identity and token at once, the endpoint seconds later: iroh probes the
   * network) and loads `--model`s; `serveMembers` answers the requests peers forward to us (the API).
   */
  start: (apiPort: number, serveMembers: (req: Request) => Promise<Response>) => void;
  /**
   * Shutdown began (a signal): nothing loads, reloads or restarts a child from here, and a child
   * that exits is not a crash; the requests in flight still finish before `stop`.
   */
  beginShutdown: () => void;
  stop: () => Promise<void>;
}

export async function createNode(config: Config, identity: MeshIdentity, llama: LlamaBinaries, devices: readonly LlamaDevice[], log: Log): Promise<NodeParts> {
  const startedAt = performance.now();
  const startedAtMs = Date.now();
  const files = config.models.filter((m) => isPath(m) && existsSync(m));
  const store = new ModelStore({ modelsDir: config.modelsDir, extraFiles: files, hasGpu: devices.length > 0, stores: storeRoots(config) });
  const { refs, explicit } = resolveModelArgs(config, files, await store.refresh());
  const hub = hubFromEnv();

  let mesh: MeshNode | undefined;
  // Kept by the membership once the mesh starts; every part reads the peers here.
  const peers = new PeerTable();
  let adopted = false; // in the mesh's decisions: a founder at once, a joiner once its endpoint is up
  // Memory offered to the mesh: the GPUs', or RAM on a CPU node.
  const vramBytes = config.vramBytes ?? (devices.length ? devices.reduce((sum, d) => sum + d.totalBytes, 0) : totalmem());
  const needOf = needAt(config.ctxSize);
  /** How a peer stands with this node (the roster's verdict it checked itself), while it is a peer. */
  const standingOf = (peerId: string) => peers.get(peerId)?.standing.standing;
  /** The peers whose word counts here (the owner's machines; every member, unanchored). */
  const countedPeers = () => [...peers.values()].filter((p) => counts(p.standing.standing));
  /** This node is a guest of its mesh: it takes no group, and serves its own clients from its own disk. */
  const isGuest = () => identity.trust().state === "guest";
  const moved = new Signal(); // our announcement: sent on each emit, if it changed
  const announce = () => moved.emit();
  // What goes up the build order: something this node announces or decides on changed (its pool,
  // its files, its replicas), and the pool unloaded a model. The group and the replicas, built
  // last, subscribe.
  const changed = new Signal();
  const evicted = new Signal<[model: string, cause: EvictionCause]>();

  const rpc = new RpcServerChild({ binary: llama.rpcServer, stateDir: config.stateDir, threads: config.rpcThreads, log });
  const zeroTransfer = new ZeroTransfer({ cacheDir: rpc.cacheDir, files: () => store.list().flatMap((m) => m.files), maxCacheBytes: config.rpcCacheBytes, log });
  const tls = config.rpcDirect === "on" ? await makeDirectIdentity() : undefined;
  let direct: { port: number; close: () => void } | undefined;
  /** A proved direct connection to a peer for `purpose`, when both ends offer the path (and the peer serves it). */
  const connectToPeer = (peerId: string, purpose: DirectPurpose) => {
    const target = directTarget(peers.get(peerId)?.announcement);
    if (!tls || !target) return undefined;
    return connectDirect(target, identity.nodeId, peerId, identity.secret, identity.sign, purpose);
  };
  const tunnels = new Tunnels({
    log,
    openStream: (peerId, kind) => peers.openStream(peerId, kind),
    rpcPort: () => rpc.port,
    rewrites: { forkRegisterPeer: false, onSetTensorHash: zeroTransfer.onSetTensorHash, rpcProtocol: () => rpc.protocol, offeredBytes: vramBytes },
    connectDirect: (peerId) => connectToPeer(peerId, "rpc"),
    // rpc-server serves one client at a time: a guest's session would hold the owner's splits off.
    mayUseRpc: (peerId) => counts(standingOf(peerId)),
  });

  const fetcher = new ModelFetcher({
    enabled: config.fetch === "on",
    modelsDir: config.modelsDir,
    selfId: () => identity.nodeId,
    openStream: peerStreamOpener({ what: "model copies", direct: (peerId) => connectToPeer(peerId, "model"), mesh: (peerId) => peers.openStream(peerId, StreamKind.MODEL), log }),
    ownSource: (model) => store.list().find((m) => m.name === model)?.source,
    ownRef: (model) => refs.get(model) ?? store.list().find((m) => m.name === model)?.ref,
    hub,
    hashCache: join(config.stateDir, "file-hashes.json"),
    // Until it hears from its mesh a joining node would pull what a member may have; not forever, should the mesh be gone.
    // A guest's word counts for nothing here: a node that joined through one still waits to hear the owner's machines.
    joining: () => config.join !== undefined && countedPeers().length === 0 && performance.now() - startedAt < JOIN_GRACE_MS,
    log,
    onProgress: announce,
    onDone: async () => {
      await store.refresh();
      changed.emit();
    },
  });
  /** A peer's request for one of our models' files, from a MODEL stream or the direct path alike. */
  const serveModel = (stream: Stream) => serveModelStream(stream, (name) => store.list().find((m) => m.name === name), fetcher.hasher);
  // Our models' content identities (announced once worked out), which also key their saved slots.
  const identities = new ModelIdentities(fetcher.hasher, announce);
  const slotCache = new SlotCache({ root: join(config.stateDir, SLOT_CACHE_DIR), build: llama.build, budgetBytes: config.kvCacheBytes, identityOf: (m) => identities.of(m), log });
  const kv = nodeKv({
    build: llama.build,
    budgetBytes: config.kvCacheBytes,
    slots: slotCache,
    models: () => store.list(),
    identityOf: (m) => identities.of(m),
    announcementOf: (member) => peers.get(member)?.announcement,
    counts: (member) => counts(standingOf(member)),
    vouched: (member) => standingOf(member) === "vouched",
    open: peerStreamOpener({ what: "KV caches", direct: (peerId) => connectToPeer(peerId, "kv"), mesh: (peerId) => peers.openStream(peerId, StreamKind.KV), log }),
    hosts: config.hosts,
    log,
  });

  // The mesh brain's state and view, before the pool that asks them about each load: the group's
  // and the replicas' state, the servers the pool will run (which we announce), what we announce,
  // the view of the mesh (ours and our peers' announcements, the catalog, what we saw ourselves),
  // and the splits.
  const groupState = new GroupState((model) => countedPeers().some((p) => p.announcement.serving.includes(model)));
  const replicaHolds = new ReplicaHolds(config.replicas === "on");
  const servers = new LoadedServers();
  // What our rpc-server says in HELLO; until it is up, what this mesh's llama.cpp speaks.
  const rpcProtocol = () => rpc.protocol ?? LLAMA_SOURCE.rpcProtocol;
  const announcer = new ModelAnnouncer({ store, refs, explicit, needOf, identities, servers, fetcher, rpcProtocol, group: groupState, replicas: replicaHolds, log });
  const view = new MeshViewCache({ selfId: () => (adopted ? identity.nodeId : undefined), peers, vramBytes, own: announcer, servers, identities });
  const splits = new SplitPlanner({
    view,
    group: groupState,
    vramBytes,
    needOf,
    ownRpcEndpoint: () => (devices.length === 0 && rpc.port ? `127.0.0.1:${rpc.port}` : undefined),
    tunnelEndpoint: async (peerId) => `127.0.0.1:${await tunnels.portFor(peerId)}`,
  });

  const cpu = nodeCpuShare(config, devices, { models: () => store.list(), lendsToSplit: () => splits.lendsToSplit() });
  const pool = new Pool({
    llama,
    stateDir: config.stateDir,
    maxLoadedModels: config.maxLoadedModels,
    idleUnloadMs: config.idleUnloadMs,
    loadTimeoutMs: config.loadTimeoutMs,
    defaultCtxSize: config.ctxSize,
    defaultArgs: config.llamacppArgs,
    log,
    servers,
    onChange: () => changed.emit(),
    rpcWorkersFor: (model) => splits.rpcSplit(model),
    onEvict: (model, cause) => evicted.emit(model, cause),
    // Loads on demand may not unload the model this node hosts for the mesh, unless --evict-mesh-models on.
    heldForMesh: (model) => config.evictMeshModels !== "on" && groupState.hostsForMesh(model, view.peerCount()),
    maxQueue: config.maxQueue,
    knownModels: async (name) => {
      // `find` rescans when the name is new: a draft copied in since the last scan is found.
      await store.find(name);
      return store.list();
    },
    localDevices: devices.map((d) => d.name),
    cpuShare: cpu.forServer,
    slotCache,
  });
  const admin = new ModelAdmin({
    store,
    inUse: (name) => pool.server(name) !== undefined || pool.isLoading(name),
    hub,
    onChange: () => changed.emit(),
    onRemoved: (name) => {
      // A deleted model's saved slots go with it.
      const identity = identities.forget(name);
      if (identity !== undefined) slotCache.drop(identity);
    },
    log,
  });

  // The parts that change the brain's state, and the router.
  // Models this node serves beside their hosts while their servers are pressed (placement/replicas.ts).
  const replicas = nodeReplicaKeeper(config, { holds: replicaHolds, view, pool, store, fetcher, changed: () => changed.emit(), remove: (name) => admin.remove(name), log });
  const group = new GroupReconciler({
    view,
    splits,
    store,
    pool,
    fetcher,
    explicit,
    hosts: config.hosts,
    replicas,
    state: groupState,
    announce,
    guest: isGuest,
    log,
  });
  const forwarder = new MeshForwarder({ peers, headMs: config.loadTimeoutMs + FORWARD_ANSWER_MS });
  const router = new MeshRouter({ view, store, needOf, vramBytes, hosts: config.hosts, forwarder, guest: isGuest });
  moved.subscribe(() => view.ownMoved());
  changed.subscribe(() => {
    announce();
    group.reconcile();
  });
  // A replica's unload is the keeper's alone: the group's rules never hear of it.
  evicted.subscribe((model, cause) => void (replicas.onEvict(model, cause) || group.onEvict(model, cause)));

  const onPeersChange = () => {
    const present = new Set(peers.keys());
    kv.heard(new Map(countedPeers().map((p) => [p.id, p.announcement])));
    for (const id of tunnels.peers()) if (!present.has(id)) tunnels.closeFor(id);
    group.reconcileSoon();
  };

  // Members' requests get as many places as the outside door's, and no member all of them; the
  // bodies they hold at once come to two of the largest a request may have per member, four in all.
  const memberStreams = new MemberStreamCap(config.maxConnections, 0.5, { perPeerBytes: 2 * config.maxBodyBytes, totalBytes: 4 * config.maxBodyBytes });

  // Children log into the state dir for as long as they run: keep those files bounded.
  const logCap = capLogsEvery(join(config.stateDir, "logs"), LOG_CAP_EVERY_MS, log);

  const start = (apiPort: number, serveMembers: (req: Request) => Promise<Response>) => {
    // What this node serves its peers, over the mesh connection and the direct path alike.
    const protocols = nodeProtocols({
      rpc: (peerId, stream) => tunnels.incoming(peerId, stream),
      http: (peerId, stream) => serveHttp(stream, serveMembers, { maxBodyBytes: config.maxBodyBytes, allow: memberMayRequest, admit: () => memberStreams.take(peerId), from: peerId }),
      model: (_peerId, stream) => serveModel(stream),
      kv: (peerId, stream) => kv.holder.serve(peerId, stream),
    });

    void rpc.start().then(announce, (err) => log.error("rpc-server failed to start; this node offers no compute to the mesh", { error: (err as Error).message.split("\n")[0] }));
    void startMesh(
      config,
      identity,
      {
        content: nodeAnnouncement({
          pool,
          models: announcer,
          rpcPort: () => rpc.port,
          vramBytes,
          apiPort,
          startedAtMs,
          llamaBuild: llama.build,
          direct: () => (direct && tls ? { port: direct.port, certSha256: tls.certSha256 } : undefined),
        }),
        onStream: (peerId, kind, stream) => protocols.dispatch(peerId, kind, stream),
        onPeersChange,
        peers,
        moved,
      },
      log,
    )
      .then(async (m) => {
        log.info("mesh identity ready; the endpoint is starting", { node: m.nodeId });
        // A founder decides (and starts loading its model) at once; a joiner waits to hear its mesh.
        const adopt = () => void ((adopted = true), (mesh ??= m), group.reconcile());
        if (!config.join) adopt();
        await m.ready;
        adopt();
        // The token carries the mesh secret: logs say where it is; only a terminal sees it, once.
        log.info("mesh endpoint up", { node: m.nodeId, mesh: m.founded ? "founded" : "joined", line: m.line });
        log.info(`join token in ${m.tokenFile.path}; \`mesh token\` ${isGuest() ? "prints none on a guest's node (only the owner invites)" : "prints it"}`);
        // A mesh moved to the other line has a new token, which its members join with.
        if (m.tokenFile.first || m.moved) await showFirstTokens(m, config.stateDir, log);
        if (!tls) return;
        direct = await startDirectServer({
          identity: tls,
          host: config.quicBind?.host ?? "0.0.0.0",
          selfId: m.nodeId,
          secret: m.secret,
          isPeer: (id) => m.membership.peers.has(id),
          rpcPort: () => rpc.port,
          forHost: (id) => tunnels.forHost(id),
          streams: protocols,
          log,
        }).catch((err) => {
          log.warn("no direct rpc path (peers use the mesh connection)", { error: (err as Error).message });
          return undefined;
        });
        announce();
      })
      .catch(async (err: unknown) => {
        // Its identity, the endpoint's start (`ready`), or the direct path's setup.
        log.error("the mesh endpoint failed to start", { error: (err as Error).message });
        await pool.close();
        await rpc.stop();
        process.exit(1);
      });
  };

  // A signal came: nothing loads, reloads or restarts a child from here (`stop` begins with it too).
  function beginShutdown(): void {
    replicas.stop();
    group.stop();
    pool.beginShutdown();
    rpc.beginShutdown();
  }

  return {
    store,
    pool,
    tunnels,
    zeroTransfer,
    rpc,
    mesh: () => mesh,
    routing: router,
    view,
    group,
    admin,
    kv,
    meshStatus: () => (mesh ? { ...mesh.status(), catalogDigest: catalogDigest(view.catalog()) } : { state: "starting", nodeId: null, peers: [] }),
    start,
    beginShutdown,
    stop: async () => {
      clearInterval(logCap);
      beginShutdown();
      // A mesh endpoint still starting has no peers to tell; exiting ends it.
      if (mesh) await Promise.race([mesh.stop(), Bun.sleep(5_000)]);
      direct?.close();
      tunnels.close();
      await pool.close();
      await rpc.stop();
    },
  };
}
