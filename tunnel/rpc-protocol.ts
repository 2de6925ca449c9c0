/**
 * llama.cpp's RPC wire protocol, as far as the tunnel needs it (ggml-rpc.cpp): a request is
 * `cmd u8 | size u64le | payload`; `rpc_tensor` is a packed 296-byte struct whose name sits at a
 * fixed offset. Command 17 is MEMSET_TENSOR upstream and REGISTER_PEER in the backend-to-backend
 * fork: which one it is follows from the negotiated protocol, never from the byte alone.
 */

export const RpcCmd = {
  ALLOC_BUFFER: 0,
  GET_ALIGNMENT: 1,
  GET_MAX_SIZE: 2,
  BUFFER_GET_BASE: 3,
  FREE_BUFFER: 4,
  BUFFER_CLEAR: 5,
  SET_TENSOR: 6,
  SET_TENSOR_HASH: 7,
  GET_TENSOR: 8,
  COPY_TENSOR: 9,
  GRAPH_COMPUTE: 10,
  GET_DEVICE_MEMORY: 11,
  INIT_TENSOR: 12,
  GET_ALLOC_SIZE: 13,
  HELLO: 14,
  DEVICE_COUNT: 15,
  GRAPH_RECOMPUTE: 16,
  /** MEMSET_TENSOR upstream; REGISTER_PEER in the fork. */
  CMD_17: 17,
  SET_TENSOR_2D: 18,
  GET_TENSOR_2D: 19,
  COMM_INIT: 20,
  COMM_ALLREDUCE: 21,
  COMM_FREE: 22,
  /** Protocol 8.1 builds. */
  SYNCHRONIZE: 23,
  SET_TENSOR_2D_HASH: 24,
} as const;

export const HEADER_BYTES = 9;
export const RPC_TENSOR_BYTES = 296;
const RPC_TENSOR_NAME_OFFSET = 228;
const RPC_TENSOR_NAME_BYTES = 64;
const RPC_TENSOR_TYPE_OFFSET = 8;
const RPC_TENSOR_NE_OFFSET = 20;
const RPC_TENSOR_NB_OFFSET = 36;

export const HELLO_CAPS_BYTES = 24;
/** ALLOC_BUFFER request: device u32 | size u64. */
export const ALLOC_BUFFER_BYTES = 12;
/** SET_TENSOR_HASH request: rpc_tensor | offset u64 | hash u64. */
export const SET_TENSOR_HASH_BYTES = RPC_TENSOR_BYTES + 16;
/** The fork's REGISTER_PEER: peer_id u32 | endpoint char[128]. */
export const REGISTER_PEER_BYTES = 4 + 128;

export interface TensorRef {
  name: string;
  type: number;
  ne: [number, number, number, number];
  nb: [number, number, number, number];
}

export function readTensor(payload: Uint8Array, at = 0): TensorRef {
  const view = new DataView(payload.buffer, payload.byteOffset + at, RPC_TENSOR_BYTES);
  const nameBytes = payload.subarray(at + RPC_TENSOR_NAME_OFFSET, at + RPC_TENSOR_NAME_OFFSET + RPC_TENSOR_NAME_BYTES);
  const end = nameBytes.indexOf(0);
  const four = (off: number) => [0, 1, 2, 3].map((i) => view.getUint32(off + 4 * i, true)) as [number, number, number, number];
  return {
    name: new TextDecoder().decode(end < 0 ? nameBytes : nameBytes.subarray(0, end)),
    type: view.getUint32(RPC_TENSOR_TYPE_OFFSET, true),
    ne: four(RPC_TENSOR_NE_OFFSET),
    nb: four(RPC_TENSOR_NB_OFFSET),
  };
}

export interface SetTensorHash {
  tensor: TensorRef;
  offset: bigint;
  hash: bigint;
}

export function readSetTensorHash(payload: Uint8Array): SetTensorHash {
  const view = new DataView(payload.buffer, payload.byteOffset, payload.length);
  return {
    tensor: readTensor(payload),
    offset: view.getBigUint64(RPC_TENSOR_BYTES, true),
    hash: view.getBigUint64(RPC_TENSOR_BYTES + 8, true),
  };
}

/** A HELLO request with no connection capabilities: what a client sends first. */
export function encodeHello(): Uint8Array {
  const frame = new Uint8Array(HEADER_BYTES + HELLO_CAPS_BYTES);
  frame[0] = RpcCmd.HELLO;
  new DataView(frame.buffer).setBigUint64(1, BigInt(HELLO_CAPS_BYTES), true);
  return frame;
}

/** `major.minor.patch` from a HELLO response payload. */
export function helloVersion(payload: Uint8Array): string {
  return `${payload[0]}.${payload[1]}.${payload[2]}`;
}

/**
 * FNV-1a 64-bit, as llama.cpp hashes tensor data (offset basis 0xcbf29ce484222325, prime
 * 0x100000001b3). Hashing a model's worker share takes seconds in plain JS (byte-serial 64-bit
 * multiply, no library offers it fast), so it runs in a 100-byte WebAssembly function:
 *
 *   (func (export "fnv") (param $p i32) (param $n i32) (param $h i64) (result i64)
 *     (local $end i32) end = p + n
 *     block loop  br_if 1 (p >= end)  h = (h ^ i64.load8_u p) * 0x100000001b3  p += 1  br 0  end end  h)
 *
 * with an exported memory of 17 pages; data is copied in 1 MiB at a time.
 */
const FNV_WASM = "AGFzbQEAAAABCAFgA39/fgF+AwIBAAUDAQARBw0CA21lbQIAA2ZudgAACjcBNQEBfyAAIAFqIQMCQANAIAAgA08NASACIAAxAACFQrODgICAIH4hAiAAQQFqIQAMAAsLIAIL";
const FNV_CHUNK = 1 << 20;
export const FNV_OFFSET_BASIS = 0xcbf29ce484222325n;

let fnvModule: { fnv: (p: number, n: number, h: bigint) => bigint; mem: WebAssembly.Memory } | undefined;

function fnvWasm() {
  if (!fnvModule) {
    const instance = new WebAssembly.Instance(new WebAssembly.Module(Buffer.from(FNV_WASM, "base64")));
    fnvModule = instance.exports as unknown as typeof fnvModule;
  }
  return fnvModule!;
}

/** Continues a hash over `data` (pass the previous result as `seed` to hash in pieces). */
export function fnv1a64(data: Uint8Array, seed = FNV_OFFSET_BASIS): bigint {
  const { fnv, mem } = fnvWasm();
  const heap = new Uint8Array(mem.buffer);
  let h = BigInt.asIntN(64, seed);
  for (let at = 0; at < data.length; at += FNV_CHUNK) {
    const piece = data.subarray(at, Math.min(data.length, at + FNV_CHUNK));
    heap.set(piece, 0);
    h = fnv(0, piece.length, h);
  }
  return BigInt.asUintN(64, h);
}

export const hashFileName = (hash: bigint): string => hash.toString(16).padStart(16, "0");
