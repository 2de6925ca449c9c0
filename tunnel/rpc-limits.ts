/**
 * How large each llama.cpp RPC request may be, on the worker end, before any of it reaches our
 * `rpc-server` (pure, apart from the small session record at the end). `rpc-server` sizes its
 * receive buffer from the declared size before a byte of payload arrives, so a member declaring
 * 512 MiB made it commit 512 MiB: the bound has to hold at the header.
 *
 * - fixed-size requests: exactly their struct's size (ggml-rpc.cpp of each protocol);
 * - SET_TENSOR, SET_TENSOR_2D: their header plus at most the largest buffer this session has
 *   ALLOC_BUFFER'ed (a tensor lies within one buffer; `rpc-server` keeps buffers per connection);
 * - GRAPH_COMPUTE: a bound from a node count far above any graph llama.cpp builds;
 * - anything else, any protocol the table does not know, and the protocol-8 collectives (they make
 *   `rpc-server` dial an address the peer chose, around the tunnel): refused.
 *
 * The layout follows the protocol's major version, what our `rpc-server` answers to HELLO.
 */
import { ALLOC_BUFFER_BYTES, HELLO_CAPS_BYTES, REGISTER_PEER_BYTES, RPC_TENSOR_BYTES as T, RpcCmd } from "./rpc-protocol.ts";

/**
 * Nodes in one GRAPH_COMPUTE. llama.cpp reserves max(1024, 8 x model tensors) nodes for most
 * models (~5,800 for a 70B llama); a recorded graph of the tiny test model has 129 nodes and 181
 * tensors. 32,768 nodes at 2 tensors each allows ~19 MiB, against the 512 MiB of the attack.
 */
export const MAX_GRAPH_NODES = 32_768;
const GRAPH_BYTES_PER_NODE = 8 + 2 * T;

interface Layout {
  fixed: ReadonlyMap<number, number>;
  /** Header before the data of data-carrying requests: [smallest, largest] (builds differ). */
  data: ReadonlyMap<number, readonly [number, number]>;
  /** GRAPH_COMPUTE's parts besides node ids and tensors. */
  graphHeader: number;
  refused: ReadonlyMap<number, string>;
}

const V7_FIXED: [number, number][] = [
  [RpcCmd.ALLOC_BUFFER, ALLOC_BUFFER_BYTES],
  [RpcCmd.GET_ALIGNMENT, 4],
  [RpcCmd.GET_MAX_SIZE, 4],
  [RpcCmd.BUFFER_GET_BASE, 8],
  [RpcCmd.FREE_BUFFER, 8],
  [RpcCmd.BUFFER_CLEAR, 9],
  [RpcCmd.SET_TENSOR_HASH, T + 16],
  [RpcCmd.GET_TENSOR, T + 16],
  [RpcCmd.COPY_TENSOR, 2 * T],
  [RpcCmd.GET_DEVICE_MEMORY, 4],
  [RpcCmd.INIT_TENSOR, T],
  [RpcCmd.GET_ALLOC_SIZE, 4 + 11 * T],
  [RpcCmd.HELLO, HELLO_CAPS_BYTES],
  [RpcCmd.DEVICE_COUNT, 0],
  [RpcCmd.GRAPH_RECOMPUTE, 4],
  // MEMSET_TENSOR: rpc_tensor | offset u64 | size u64 | value u8
  [RpcCmd.CMD_17, T + 17],
];

const COLLECTIVE = "server-to-server collectives (-sm tensor) would make rpc-server dial an address the peer chose, around the tunnel";

const LAYOUTS: Readonly<Record<number, Layout>> = {
  // The pinned build: SET_TENSOR is rpc_tensor | cache_flag u8 | offset u64 | data.
  7: {
    fixed: new Map(V7_FIXED),
    data: new Map([[RpcCmd.SET_TENSOR, [T + 9, T + 9]]]),
    graphHeader: 12,
    refused: new Map(),
  },
  // GRAPH_COMPUTE and GRAPH_RECOMPUTE carry a graph uid; SET_TENSOR has the cache flag in some
  // builds only; the 2D requests are rpc_tensor | offset | size | n_copies | stride (| hash).
  8: {
    fixed: new Map([
      ...V7_FIXED,
      [RpcCmd.GRAPH_RECOMPUTE, 12],
      [RpcCmd.GET_TENSOR_2D, T + 32],
      [RpcCmd.SYNCHRONIZE, 4],
      [RpcCmd.SET_TENSOR_2D_HASH, T + 40],
    ]),
    data: new Map([
      [RpcCmd.SET_TENSOR, [T + 8, T + 9]],
      [RpcCmd.SET_TENSOR_2D, [T + 32, T + 32]],
    ]),
    graphHeader: 20,
    refused: new Map([
      [RpcCmd.COMM_INIT, COLLECTIVE],
      [RpcCmd.COMM_ALLREDUCE, COLLECTIVE],
      [RpcCmd.COMM_FREE, COLLECTIVE],
    ]),
  },
};

export const KNOWN_PROTOCOLS = Object.keys(LAYOUTS).map(Number);

export interface LimitContext {
  /** Major version of the RPC protocol our rpc-server speaks. */
  major: number;
  /** Command 17 is the fork's REGISTER_PEER, not MEMSET_TENSOR. */
  forkRegisterPeer: boolean;
  /** Largest ALLOC_BUFFER this session has asked for (0 before any). */
  largestBuffer: number;
}

export type Bound = { min: number; max: number; why: string } | { refused: string };

const NAMES = new Map<number, string>(Object.entries(RpcCmd).map(([name, cmd]) => [cmd, name]));

export function commandName(cmd: number, ctx: Pick<LimitContext, "forkRegisterPeer">): string {
  if (cmd === RpcCmd.CMD_17) return ctx.forkRegisterPeer ? "REGISTER_PEER" : "MEMSET_TENSOR";
  return NAMES.get(cmd) ?? `command ${cmd}`;
}

/** The payload sizes a request may declare. */
export function requestBound(cmd: number, ctx: LimitContext): Bound {
  const layout = LAYOUTS[ctx.major];
  if (!layout) return { refused: `rpc-server speaks RPC protocol ${ctx.major}; the tunnel knows request sizes for protocols ${KNOWN_PROTOCOLS.join(" and ")} only` };
  const refused = layout.refused.get(cmd);
  if (refused) return { refused };
  if (cmd === RpcCmd.CMD_17 && ctx.forkRegisterPeer) return { min: REGISTER_PEER_BYTES, max: REGISTER_PEER_BYTES, why: "its fixed size" };
  const fixed = layout.fixed.get(cmd);
  if (fixed !== undefined) return { min: fixed, max: fixed, why: "its fixed size" };
  const data = layout.data.get(cmd);
  if (data) return { min: data[0], max: data[1] + ctx.largestBuffer, why: `its header plus the largest buffer this session allocated (${ctx.largestBuffer} bytes)` };
  if (cmd === RpcCmd.GRAPH_COMPUTE) {
    return { min: layout.graphHeader, max: layout.graphHeader + MAX_GRAPH_NODES * GRAPH_BYTES_PER_NODE, why: `a graph of ${MAX_GRAPH_NODES} nodes` };
  }
  return { refused: `protocol ${ctx.major} has no such command` };
}

/** Why a request declaring `size` payload bytes may not pass; undefined when it may. */
export function checkRequest(cmd: number, size: bigint, ctx: LimitContext): string | undefined {
  const name = commandName(cmd, ctx);
  const bound = requestBound(cmd, ctx);
  if ("refused" in bound) return `RPC ${name} refused: ${bound.refused}`;
  if (size < BigInt(bound.min) || size > BigInt(bound.max)) {
    const range = bound.min === bound.max ? `${bound.min}` : `${bound.min} to ${bound.max}`;
    return `RPC ${name} declares ${size} payload bytes; protocol ${ctx.major} allows ${range} (${bound.why})`;
  }
  return undefined;
}

/** The size an ALLOC_BUFFER request asks for (its payload is device u32 | size u64). */
export function allocBufferSize(payload: Uint8Array): number {
  const size = new DataView(payload.buffer, payload.byteOffset, payload.length).getBigUint64(4, true);
  // Beyond 2^53 bytes no allocation succeeds; the clamp keeps the arithmetic in numbers exact enough.
  return Number(size > BigInt(Number.MAX_SAFE_INTEGER) ? BigInt(Number.MAX_SAFE_INTEGER) : size);
}

/** The major version in `major.minor.patch`; undefined when it does not read as one. */
export function protocolMajor(version: string): number | undefined {
  const m = /^(\d+)\./.exec(version);
  return m ? Number(m[1]) : undefined;
}

/**
 * One connection's limits: what its ALLOC_BUFFER requests taught us, and the check against them.
 * A request is what the member asked for, not what rpc-server managed to allocate (that is in a
 * response this end does not read): an ALLOC_BUFFER of 1 TiB fails in rpc-server but would lift
 * the bound, so no buffer counts as larger than the memory this node offers the mesh.
 */
export class SessionLimits {
  private largestBuffer = 0;
  /** The session has asked for a buffer: it is past its setup (`rpc-sessions.ts`). */
  allocated = false;

  constructor(
    private readonly major: number,
    private readonly forkRegisterPeer: boolean,
    private readonly offeredBytes = Number.MAX_SAFE_INTEGER,
  ) {}

  check(cmd: number, size: bigint): string | undefined {
    return checkRequest(cmd, size, { major: this.major, forkRegisterPeer: this.forkRegisterPeer, largestBuffer: this.largestBuffer });
  }

  /** Commands whose payload the limits must read (small, fixed-size: already checked). */
  observes(cmd: number): boolean {
    return cmd === RpcCmd.ALLOC_BUFFER;
  }

  observed(cmd: number, payload: Uint8Array): void {
    if (cmd !== RpcCmd.ALLOC_BUFFER || payload.length !== ALLOC_BUFFER_BYTES) return;
    const size = allocBufferSize(payload);
    // An empty buffer is no work begun: it does not end the setup.
    if (size > 0) this.allocated = true;
    this.largestBuffer = Math.max(this.largestBuffer, Math.min(size, this.offeredBytes));
  }
}
