/**
 * The rewrites a worker's end of a tunnel applies to llama.cpp RPC requests before they reach its
 * `rpc-server` (pure, apart from the zero-transfer hook it is given):
 * - HELLO: the connection capabilities are zeroed, so no transport upgrade (RDMA) tries to go
 *   around the tunnel;
 * - REGISTER_PEER (the backend-to-backend fork only, by option: upstream 17 is MEMSET_TENSOR):
 *   the endpoint is replaced with this machine's tunnel port for that peer;
 * - SET_TENSOR_HASH: handed to the zero-transfer hook, which may place the tensor in the cache
 *   from a local copy of the model; the request itself passes unchanged.
 */
import { HELLO_CAPS_BYTES, REGISTER_PEER_BYTES, RpcCmd, SET_TENSOR_HASH_BYTES } from "./rpc-protocol.ts";

export interface RewriteOptions {
  /** The connection speaks the fork's protocol: command 17 is REGISTER_PEER. */
  forkRegisterPeer: boolean;
  /** This machine's endpoint for a peer named in a REGISTER_PEER endpoint, if we know it. */
  resolvePeerEndpoint?: (endpoint: string) => string | undefined;
  /** Called with every SET_TENSOR_HASH payload before it is forwarded. */
  onSetTensorHash?: (payload: Uint8Array) => Promise<void>;
  /** The RPC protocol our rpc-server answered HELLO with (`major.minor.patch`): request sizes follow it. */
  rpcProtocol?: () => string | undefined;
  /** Memory this node offers the mesh: no buffer a session asks for counts as larger (see rpc-limits.ts). */
  offeredBytes?: number;
}

export interface RewriteCounters {
  rewrites: number;
}

/** Which commands the worker end collects whole: only those it may change, at their exact size. */
export function captures(opts: RewriteOptions): (cmd: number, size: number) => boolean {
  return (cmd, size) =>
    (cmd === RpcCmd.HELLO && size === HELLO_CAPS_BYTES) ||
    (cmd === RpcCmd.SET_TENSOR_HASH && size === SET_TENSOR_HASH_BYTES && opts.onSetTensorHash !== undefined) ||
    (cmd === RpcCmd.CMD_17 && size === REGISTER_PEER_BYTES && opts.forkRegisterPeer);
}

const ENDPOINT_OFFSET = 4;
const ENDPOINT_BYTES = 128;

export function registerPeerEndpoint(payload: Uint8Array): string {
  const raw = payload.subarray(ENDPOINT_OFFSET, ENDPOINT_OFFSET + ENDPOINT_BYTES);
  const end = raw.indexOf(0);
  return new TextDecoder().decode(end < 0 ? raw : raw.subarray(0, end));
}

/** The payload with its endpoint replaced (NUL-padded), or undefined when it cannot be. */
export function withRegisterPeerEndpoint(payload: Uint8Array, endpoint: string): Uint8Array | undefined {
  const bytes = new TextEncoder().encode(endpoint);
  if (bytes.length >= ENDPOINT_BYTES) return undefined;
  const out = payload.slice();
  out.fill(0, ENDPOINT_OFFSET, ENDPOINT_OFFSET + ENDPOINT_BYTES);
  out.set(bytes, ENDPOINT_OFFSET);
  return out;
}

/** The replacement payload, or undefined to forward the original. */
export async function rewriteRequest(cmd: number, payload: Uint8Array, opts: RewriteOptions, counters: RewriteCounters): Promise<Uint8Array | undefined> {
  if (cmd === RpcCmd.HELLO && payload.length === HELLO_CAPS_BYTES) {
    if (payload.every((b) => b === 0)) return undefined;
    counters.rewrites++;
    return new Uint8Array(HELLO_CAPS_BYTES);
  }
  if (cmd === RpcCmd.SET_TENSOR_HASH && opts.onSetTensorHash) {
    await opts.onSetTensorHash(payload);
    return undefined;
  }
  if (cmd === RpcCmd.CMD_17 && opts.forkRegisterPeer && payload.length === REGISTER_PEER_BYTES) {
    const local = opts.resolvePeerEndpoint?.(registerPeerEndpoint(payload));
    const out = local === undefined ? undefined : withRegisterPeerEndpoint(payload, local);
    if (out) counters.rewrites++;
    return out;
  }
  return undefined;
}
