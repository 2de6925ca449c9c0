/**
 * `mesh pull REF [--name NAME]`: downloads a model into the models dir. Through the local node when
 * one answers (its `/api/v1/pull`, read as server-sent events), so its pool and its announcements
 * see the model at once; without one, straight into --models-dir with the Hugging Face settings of
 * this environment (HF_TOKEN, HF_ENDPOINT). A bar on a terminal, log lines otherwise; Ctrl-C stops
 * the download and keeps what it staged, so the same pull resumes.
 */
import { homedir } from "node:os";
import type { Config } from "../config/config.ts";
import { createLog } from "../base/log.ts";
import { hubConfigFromEnv } from "../models/hf-hub.ts";
import { PullError } from "../models/pull-error.ts";
import { pullModel } from "../models/pull.ts";
import { progressReporter } from "../base/progress.ts";
import { CommandError } from "./common.ts";
import { errorText, localNode, type LocalNode } from "./local-node.ts";

export interface SseMessage {
  event: string;
  data: string;
}

/** An SSE event larger than this is not one of ours: the stream is refused. */
const MAX_SSE_EVENT = 64 * 1024;

/** Complete events at the head of `buffer`, and the text after them (pure). */
export function readSseEvents(buffer: string): { events: SseMessage[]; rest: string } {
  const text = buffer.replace(/\r\n?/g, "\n");
  const blocks = text.split("\n\n");
  const rest = blocks.pop() ?? "";
  const events: SseMessage[] = [];
  for (const block of blocks) {
    let event = "message";
    const data: string[] = [];
    for (const line of block.split("\n")) {
      if (line.startsWith(":")) continue;
      const colon = line.indexOf(":");
      const field = colon === -1 ? line : line.slice(0, colon);
      const value = colon === -1 ? "" : line.slice(colon + 1).replace(/^ /, "");
      if (field === "event") event = value;
      else if (field === "data") data.push(value);
    }
    if (data.length) events.push({ event, data: data.join("\n") });
  }
  return { events, rest };
}

const mib = (b: number) => `${(b / 2 ** 20).toFixed(1)} MiB`;

interface Done {
  name: string;
  files: number;
  bytes: number;
}

async function pullThroughNode({ url, headers }: LocalNode, config: Config, ref: string, name: string | undefined, signal: AbortSignal): Promise<Done> {
  const log = createLog(config.logFormat);
  const res = await fetch(`${url}/api/v1/pull`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify(name ? { model_name: name, checkpoint: ref, stream: true } : { model_name: ref, stream: true }),
    signal,
  });
  if (!res.ok || !res.body) throw new CommandError(await errorText(res));
  const progress = progressReporter(`pulling ${ref}`, log);
  const decoder = new TextDecoder();
  let buffer = "";
  try {
    for await (const chunk of res.body) {
      buffer += decoder.decode(chunk, { stream: true });
      const { events, rest } = readSseEvents(buffer);
      if (rest.length > MAX_SSE_EVENT) throw new CommandError(`the node at ${url} sent an event of over ${MAX_SSE_EVENT} bytes; is it a mesh node?`);
      buffer = rest;
      for (const e of events) {
        const data = JSON.parse(e.data) as Record<string, unknown>;
        if (e.event === "progress") progress.update(Number(data.cumulative_bytes_downloaded ?? 0), Number(data.total_download_size ?? 0));
        else if (e.event === "error") throw new CommandError(String(data.error ?? "the pull failed"));
        else if (e.event === "complete") {
          return { name: String(data.model_name ?? name ?? ref), files: Number(data.total_files ?? 0), bytes: Number(data.total_download_size ?? 0) };
        }
      }
    }
  } finally {
    progress.done();
  }
  throw new CommandError(`the node at ${url} ended the pull's stream without saying how it went; \`mesh models\` shows whether the model is there`);
}

async function pullHere(config: Config, ref: string, name: string | undefined, signal: AbortSignal): Promise<Done> {
  const log = createLog(config.logFormat);
  const progress = progressReporter(`pulling ${ref}`, log);
  try {
    const pulled = await pullModel({
      ref,
      ...(name ? { name } : {}),
      modelsDir: config.modelsDir,
      hub: hubConfigFromEnv(process.env, homedir()),
      onProgress: (p) => progress.update(p.allBytes, p.allTotal),
      signal,
      log,
    });
    return { name: pulled.name, files: pulled.files.length, bytes: pulled.sizeBytes };
  } catch (err) {
    if (err instanceof PullError) throw new CommandError(err.message);
    throw err;
  } finally {
    progress.done();
  }
}

export async function pullCommand(config: Config, ref: string, name: string | undefined): Promise<void> {
  const node = await localNode(config);
  const stop = new AbortController();
  const interrupt = () => stop.abort();
  process.once("SIGINT", interrupt);
  try {
    const done = node ? await pullThroughNode(node, config, ref, name, stop.signal) : await pullHere(config, ref, name, stop.signal);
    const where = node ? `through the node at ${node.url}` : `into ${config.modelsDir}`;
    console.log(`pulled ${done.name} (${done.files} file${done.files === 1 ? "" : "s"}, ${mib(done.bytes)}) ${where}`);
  } catch (err) {
    if (stop.signal.aborted) throw new CommandError("pull interrupted; what was downloaded is kept, and the same `mesh pull` resumes it");
    throw err;
  } finally {
    process.off("SIGINT", interrupt);
  }
}
