/**
 * The mesh's transport, whatever carries it: authenticated QUIC connections between node ids,
 * bidirectional streams on them, and our own address. Two lines implement it, each the only file
 * that imports its iroh binding: `transport-iroh1.ts` (`@number0/iroh` 1.x, the default) and
 * `transport-iroh035.ts` (0.35, for meshes founded on it). The two do not speak to each other; a
 * join token says which line its mesh runs, and a joiner follows it (`mesh-line.ts`).
 */
import { DEFAULT_LINE, LEGACY_LINE, type Transport as Endpoint, type TransportOptions } from "./transport-kit.ts";

// What every floor above uses of the transport lives in `transport-kit.ts`, which the lines import too.
export * from "./transport-kit.ts";

/** A started endpoint of either line. */
export type Transport = Endpoint;

/** Starts an endpoint of the line asked for (the binding is loaded only when it is used). */
async function start(opts: TransportOptions): Promise<Transport> {
  if ((opts.line ?? DEFAULT_LINE) === "iroh035") return (await import("./transport-iroh035.ts")).Iroh035Transport.start(opts);
  return (await import("./transport-iroh1.ts")).Iroh1Transport.start(opts);
}

export const Transport = {
  /** Chooses the ports, derives the node id and starts the endpoint behind them; `ready` says when it is up. */
  start,
  /** Starts and waits until the endpoint is up (tools and tests that have nothing to do meanwhile). */
  async bind(opts: TransportOptions): Promise<Transport> {
    const transport = await start(opts);
    await transport.ready;
    return transport;
  },
};

/** Loads each line's native addon and says which bindings the executable carries (`mesh --version`). */
export async function describeTransport(): Promise<string> {
  // The default line first; a platform without one line's addon still runs the other.
  const lines = await Promise.allSettled([import("./transport-iroh1.ts").then((m) => m.describeIroh1()), import("./transport-iroh035.ts").then((m) => m.describeIroh035())]);
  const names = [DEFAULT_LINE, LEGACY_LINE];
  return lines.map((l, i) => (l.status === "fulfilled" ? l.value : `${names[i]} unavailable (${String((l.reason as Error)?.message ?? l.reason).split("\n")[0]})`)).join("; ");
}

