/**
 * This node's `rpc-server` child: the compute it offers the mesh. Bound to 127.0.0.1 only (it has
 * no authentication; peers reach it through the authenticated tunnel), with its tensor cache
 * (`-c`) in the state dir. It is up when its port accepts a connection (an unknown flag makes it
 * print usage and exit 0, so a running process proves nothing); it is restarted if it dies while
 * the node runs, never once the node shuts down.
 */
import { closeSync, mkdirSync, openSync } from "node:fs";
import { createConnection } from "node:net";
import { join } from "node:path";
import type { Subprocess } from "bun";
import type { Log } from "../base/log.ts";
import { encodeHello, helloVersion } from "../tunnel/rpc-protocol.ts";
import { KNOWN_PROTOCOLS, protocolMajor } from "../tunnel/rpc-limits.ts";
import { freePort } from "./free-port.ts";
import { childLaunch, CRASH_VERDICT_DELAY_MS, readLogTail, terminate } from "./child-process.ts";

export interface RpcServerOptions {
  binary: string;
  stateDir: string;
  threads: number;
  log: Log;
}

function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = createConnection({ host: "127.0.0.1", port });
    s.once("connect", () => {
      s.destroy();
      resolve(true);
    });
    s.once("error", () => resolve(false));
  });
}

/**
 * The RPC protocol version the server speaks, from its answer to HELLO (`major.minor.patch`):
 * what a split group must share, whatever build `--llama-dir` points at.
 */
export function helloProtocol(port: number, timeoutMs = 3_000): Promise<string | undefined> {
  return new Promise((resolve) => {
    const socket = createConnection({ host: "127.0.0.1", port });
    let got = Buffer.alloc(0);
    const done = (v: string | undefined) => {
      clearTimeout(timer);
      socket.destroy();
      resolve(v);
    };
    const timer = setTimeout(() => done(undefined), timeoutMs);
    socket.on("connect", () => socket.write(encodeHello()));
    socket.on("data", (d: Buffer) => {
      got = Buffer.concat([got, d]);
      // size u64 | major u8 minor u8 patch u8 ...
      if (got.length >= 8 + 3) done(helloVersion(got.subarray(8)));
    });
    socket.on("error", () => done(undefined));
    socket.on("close", () => done(undefined));
  });
}

export class RpcServerChild {
  port: number | undefined;
  /** Its RPC protocol version, once asked (undefined if it did not say). */
  protocol: string | undefined;
  private proc: Subprocess | undefined;
  private stopping = false;
  readonly cacheRoot: string;
  readonly logPath: string;

  constructor(private readonly opts: RpcServerOptions) {
    this.cacheRoot = join(opts.stateDir, "llama-cache");
    this.logPath = join(opts.stateDir, "logs", "rpc-server.log");
    mkdirSync(join(opts.stateDir, "logs"), { recursive: true });
  }

  /** Where `rpc-server -c` keeps tensors: `$LLAMA_CACHE/rpc`. */
  get cacheDir(): string {
    return join(this.cacheRoot, "rpc");
  }

  async start(): Promise<void> {
    const port = freePort();
    const launch = childLaunch([this.opts.binary, "-H", "127.0.0.1", "-p", String(port), "-t", String(this.opts.threads), "-c"]);
    const fd = openSync(this.logPath, "a");
    try {
      this.proc = Bun.spawn(launch.argv, {
        detached: launch.detached,
        stdin: "ignore",
        stdout: fd,
        stderr: fd,
        env: { ...process.env, LLAMA_CACHE: this.cacheRoot, GGML_NO_BACKTRACE: "1" },
      });
    } finally {
      closeSync(fd);
    }
    const proc = this.proc;
    const deadline = Date.now() + 30_000;
    while (!(await accepts(port))) {
      const ended = proc.exitCode !== null || proc.signalCode !== null;
      // Stopped while it started (the node shuts down): that is no failure to report.
      if (ended && this.stopping) return;
      if (ended || Date.now() > deadline) {
        proc.kill("SIGKILL");
        throw new Error(`rpc-server did not start listening on 127.0.0.1:${port}\n${readLogTail(this.logPath)}`);
      }
      await Bun.sleep(20);
    }
    this.protocol = await helloProtocol(port);
    this.port = port;
    this.opts.log.info("rpc-server ready", { port, pid: proc.pid, protocol: this.protocol });
    // Said as it starts: otherwise every split over this node fails at its first request.
    const major = protocolMajor(this.protocol ?? "");
    if (major !== undefined && !KNOWN_PROTOCOLS.includes(major)) {
      this.opts.log.warn(`rpc-server speaks RPC protocol ${this.protocol}, whose request sizes this mesh does not know (${KNOWN_PROTOCOLS.join(", ")}): peers' splits cannot use this node; run the llama.cpp this mesh pins (mesh llama)`);
    }
    void proc.exited.then((code) => {
      if (this.proc !== proc) return;
      this.port = undefined;
      if (this.stopping) return;
      setTimeout(() => {
        if (this.stopping) return;
        this.opts.log.error("rpc-server exited; restarting it", { code: code ?? proc.signalCode });
        void this.start().catch((err) => this.opts.log.error("rpc-server restart failed", { error: (err as Error).message }));
      }, CRASH_VERDICT_DELAY_MS);
    });
  }

  /**
   * The node shuts down: from here the server's exit is expected (the node stops it, or a signal
   * meant for the node reached it first), and nothing starts it again.
   */
  beginShutdown(): void {
    this.stopping = true;
  }

  async stop(): Promise<void> {
    this.beginShutdown();
    if (this.proc) await terminate(this.proc, 3000);
  }
}
