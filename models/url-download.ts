/**
 * One file from a URL (a model from a Hugging Face `resolve` URL, a llama.cpp release archive) into a folder. A cut
 * download resumes with `Range`, from this call's retries or from a later call; network errors
 * and 5xx are tried again with backoff. The file is verified against the SHA-256 the caller gives
 * or, failing that, the one the server states (Hugging Face sends an LFS file's SHA-256 as
 * `x-linked-etag` on its redirect, so redirects are followed here, one hop at a time).
 *
 * A model must start with GGUF's magic (checked on the first bytes, before more are written) and
 * never lands on a file that is already there. Under a `rule` (a source a peer announced), every
 * hop's URL and every address its host resolves to are checked, and the connection is pinned to
 * the checked address, so a name that resolves elsewhere a moment later (DNS rebinding) is not
 * followed; `limit` caps the file's size.
 */
import { existsSync } from "node:fs";
import { lookup } from "node:dns/promises";
import { isIP } from "node:net";
import { join } from "node:path";
import { notWeb } from "../base/web-fetch.ts";
import { addressesProblem, agreesWithGgufMagic, bareHost, pinnedAddress, sizeProblem, urlProblem, type SizeLimit, type SourceRule } from "./download-rules.ts";
import {
  arrivalName,
  nameTaken,
  PartFile,
  SHA256_HEX,
  SizeRefused,
  sleep,
  throttledProgress,
  TransferError,
  TransferRefused,
  type OnProgress,
  type PartOrigin,
} from "./model-transfer.ts";

const TRIES = 3;
const MAX_REDIRECTS = 8;
/** Headers that carry credentials for the origin they were given for, and no other. */
const CREDENTIALS = new Set(["authorization", "cookie"]);

export interface UrlDownloadOptions {
  url: string;
  model: string;
  destDir: string;
  /** Hex SHA-256 the file must have; without it the server's word (etag) is used when it gives one. */
  sha256?: string;
  /** Sent with every request (`authorization` for a gated repository); dropped on a redirect to another origin. */
  headers?: Record<string, string>;
  onProgress?: OnProgress;
  signal?: AbortSignal;
  fetchImpl?: typeof fetch;
  /**
   * A file that is no model (an archive, say), under this name in a folder of its own: it is not
   * checked for GGUF's magic and replaces a file of that name.
   */
  fileName?: string;
  /** Pause before the second try; it doubles for each one after. */
  retryDelayMs?: number;
  /** Where every hop may go (a source a peer announced); none: any http(s) URL (the operator's own). */
  rule?: SourceRule;
  /** How a host name resolves to addresses under `rule` (tests give their own). */
  resolve?: (host: string) => Promise<string[]>;
  /** How large the file may be; it is cut and removed the moment it passes this. */
  limit?: SizeLimit;
}

export interface UrlDownload {
  path: string;
  sha256: string;
  /** False when neither the caller nor the server gave a hash to compare with: the file is taken as it came. */
  verified: boolean;
}

/** Downloads `url` to `<destDir>/<model>.gguf` (a shard keeps its suffix, a projector becomes `mmproj-<model>.gguf`). */
export async function downloadFromUrl(opts: UrlDownloadOptions): Promise<UrlDownload> {
  let url: URL;
  try {
    url = new URL(opts.url);
  } catch {
    throw new TransferError(`"${opts.url}" is not a URL`);
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") throw new TransferError(`${opts.url}: only http and https URLs can be downloaded`);
  const expected = opts.sha256?.toLowerCase();
  if (expected !== undefined && !SHA256_HEX.test(expected)) throw new TransferError(`"${opts.sha256}" is not a hex SHA-256`);
  const fileName = decodeURIComponent(url.pathname.split("/").pop() ?? "");
  const name = opts.fileName ?? arrivalName(opts.model, fileName, /mmproj/i.test(fileName) ? "projector" : "model");
  opts.signal?.throwIfAborted();
  // models.json may map this name to another model: that file is not ours to replace.
  if (opts.fileName === undefined && existsSync(join(opts.destDir, name))) throw nameTaken(join(opts.destDir, name));

  const part = await PartFile.open(opts.destDir, name);
  const progress = throttledProgress(opts.model, opts.onProgress);
  try {
    if (part.offset > 0 && !differs(part.origin, { sha256: expected })) await part.resume();
    else await part.restart({ sha256: expected });
    let failures = 0;
    for (;;) {
      const before = part.offset;
      try {
        const done = await attempt(opts, url, part, expected, progress);
        progress.done();
        return done;
      } catch (err) {
        opts.signal?.throwIfAborted();
        if (err instanceof TransferError) throw err;
        // A try that moved bytes starts the count again: a long download over a flaky link goes on.
        failures = part.offset > before ? 1 : failures + 1;
        if (failures >= TRIES) {
          throw new Error(`downloading ${url} failed ${TRIES} times in a row (${(err as Error).message}); the partial file is kept and the next attempt resumes from there`, {
            cause: err,
          });
        }
        await sleep((opts.retryDelayMs ?? 1000) * 2 ** (failures - 1), opts.signal);
      }
    }
  } finally {
    // A part that never got a byte (a refusal, a server that never answered) is litter, not progress.
    if (part.offset === 0) await part.discard().catch(() => undefined);
    await part.close();
  }
}

/** One request (restarted from 0 when what is here turns out to be of another version) and its body. */
async function attempt(
  opts: UrlDownloadOptions,
  url: URL,
  part: PartFile,
  expected: string | undefined,
  progress: ReturnType<typeof throttledProgress>,
): Promise<UrlDownload> {
  for (let restarts = 0; ; restarts++) {
    if (restarts > 2) throw new TransferError(`${url} keeps changing while it downloads; try again later`);
    const offset = part.offset;
    const { response: res, linkedSha256 } = await get(opts, url, offset > 0 ? `bytes=${offset}-` : undefined);
    const etag = strongEtag(res.headers.get("etag"));
    const sha256 = expected ?? linkedSha256 ?? (etag && SHA256_HEX.test(etag) ? etag : undefined);
    const length = optionalInt(res.headers.get("content-length"));
    let total: number | undefined;
    if (res.status === 200) {
      total = length;
      await refuseSize(res, url, total, opts.limit);
      const origin = { size: total, sha256, etag };
      // A 200 to a range request is the whole file: the server ignored the range.
      if (offset > 0) await part.restart(origin);
      else await part.setOrigin(origin);
    } else if (res.status === 206 && offset > 0) {
      const range = contentRange(res.headers.get("content-range"));
      total = range?.total ?? (length === undefined ? undefined : offset + length);
      if (range?.start !== offset || differs(part.origin, { size: total, sha256, etag })) {
        await res.body?.cancel().catch(() => undefined);
        await part.restart({});
        continue;
      }
      await refuseSize(res, url, total, opts.limit);
      await part.setOrigin({ size: total, sha256, etag });
    } else if (res.status === 416 && offset > 0) {
      await res.body?.cancel().catch(() => undefined);
      // Every byte is here already (the last run stopped between the last byte and the rename).
      const whole = /^bytes \*\/(\d+)$/.exec(res.headers.get("content-range") ?? "");
      if (whole && Number(whole[1]) === offset && !differs(part.origin, { size: offset, sha256, etag })) return install(opts, url, part, sha256);
      await part.restart({});
      continue;
    } else {
      await res.body?.cancel().catch(() => undefined);
      throw statusError(res.status, url);
    }

    progress.set({ bytes: part.offset, total: total ?? 0 });
    if (!res.body) throw new Error(`${url} answered ${res.status} without a body`);
    const model = opts.fileName === undefined;
    // Throwing out of the loop cancels the body: the connection closes there, nothing more is read.
    for await (const chunk of res.body) {
      if (total !== undefined && part.offset + chunk.length > total) {
        await part.discard();
        throw new TransferError(`${url} sent more than the ${total} bytes it announced; the partial file was removed`);
      }
      if (opts.limit && part.offset + chunk.length > opts.limit.maxBytes) {
        await part.discard();
        throw new SizeRefused(`${url} sent more than ${opts.limit.why}; the download was stopped and the partial file removed`);
      }
      if (model && !agreesWithGgufMagic(part.offset, chunk)) {
        await part.discard();
        throw notGguf(url);
      }
      await part.write(chunk);
      progress.set({ bytes: part.offset });
    }
    if (total !== undefined && part.offset < total) throw new Error(`the connection closed after ${part.offset} of ${total} bytes`);
    progress.set({ bytes: part.offset, total: total ?? part.offset });
    return install(opts, url, part, sha256);
  }
}

async function install(opts: UrlDownloadOptions, url: URL, part: PartFile, sha256: string | undefined): Promise<UrlDownload> {
  const model = opts.fileName === undefined;
  // A part resumed from an earlier run was written before this run could look at its head.
  if (model && (part.offset < 4 || !agreesWithGgufMagic(0, await Bun.file(part.partPath).slice(0, 4).bytes()))) {
    await part.discard();
    throw notGguf(url);
  }
  const done = await part.install(sha256, { replace: !model });
  return { path: done.path, sha256: done.sha256, verified: sha256 !== undefined };
}

function notGguf(url: URL): TransferError {
  return new TransferError(`${url} is not a GGUF model file (it does not start with "GGUF"); the download was stopped and nothing was kept`);
}

/** Refuses a response whose stated size breaks the limit, before a byte of its body is read. */
async function refuseSize(res: Response, url: URL, total: number | undefined, limit: SizeLimit | undefined): Promise<void> {
  const problem = sizeProblem(total, limit);
  if (!problem) return;
  await res.body?.cancel().catch(() => undefined);
  throw new SizeRefused(`${url} is refused: ${problem}`);
}

/** GET, following redirects by hand so the hub's `x-linked-etag` is seen and credentials stay with their origin. */
async function get(opts: UrlDownloadOptions, url: URL, range: string | undefined): Promise<{ response: Response; linkedSha256: string | undefined }> {
  const fetchImpl = opts.fetchImpl ?? fetch;
  let headers: Record<string, string> = { ...opts.headers, ...(range ? { range } : {}) };
  let linkedSha256: string | undefined;
  let current = url;
  for (let hop = 0; hop <= MAX_REDIRECTS; hop++) {
    // Whoever chose the URL, every hop is http(s): fetch would read a file: URL off this disk.
    if (notWeb(current)) throw new TransferRefused(`${url.href} redirects to ${current.href}: only http and https URLs can be downloaded`);
    const pin = opts.rule ? await pinned(current, opts.rule, opts.resolve ?? resolveHost) : undefined;
    const response = await fetchImpl(pin?.url ?? current, { headers: { ...headers, ...pin?.headers }, redirect: "manual", signal: opts.signal, ...(pin?.tls ? { tls: pin.tls } : {}) });
    const linked = strongEtag(response.headers.get("x-linked-etag"));
    if (linked && SHA256_HEX.test(linked)) linkedSha256 ??= linked;
    const location = response.headers.get("location");
    if (response.status < 300 || response.status >= 400 || !location) return { response, linkedSha256 };
    await response.body?.cancel().catch(() => undefined);
    const next = new URL(location, current);
    if (next.origin !== current.origin) headers = Object.fromEntries(Object.entries(headers).filter(([k]) => !CREDENTIALS.has(k.toLowerCase())));
    current = next;
  }
  throw new TransferError(`${url} redirects more than ${MAX_REDIRECTS} times`);
}

/** Every address a host name resolves to. */
async function resolveHost(host: string): Promise<string[]> {
  return (await lookup(host, { all: true, verbatim: true })).map((a) => a.address);
}

/**
 * The request for one hop under `rule`: refused unless the URL and every address of its host pass;
 * else aimed at one checked address, with the name kept for the `Host` header and the certificate.
 */
async function pinned(url: URL, rule: SourceRule, resolve: (host: string) => Promise<string[]>): Promise<{ url: URL; headers: Record<string, string>; tls?: { serverName: string } }> {
  const refuse = (problem: string) => new TransferRefused(`${url} is refused (${rule.who} must be an https URL of a public address): ${problem}`);
  const urlIssue = urlProblem(url, rule);
  if (urlIssue) throw refuse(urlIssue);
  const host = bareHost(url);
  if (isIP(host) !== 0) return { url, headers: {} };
  const addresses = await resolve(host);
  const addressIssue = addressesProblem(host, addresses, rule);
  if (addressIssue) throw refuse(addressIssue);
  const address = pinnedAddress(addresses);
  const target = new URL(url);
  target.hostname = isIP(address) === 6 ? `[${address}]` : address;
  return { url: target, headers: { host: url.host }, tls: { serverName: host } };
}

function statusError(status: number, url: URL): Error {
  // Worth another try: the server or something in front of it is having a moment.
  if (status >= 500 || status === 429 || status === 408) return new Error(`${url} answered ${status}`);
  if (status === 401 || status === 403) return new TransferError(`${url} answered ${status}: the file is private or gated; pass a token with access to it`);
  if (status === 404) return new TransferError(`${url} answered 404: no such file; check the repository, revision and file name`);
  return new TransferError(`${url} answered ${status}`);
}

/** An etag's value, lowercased without quotes; weak ones say nothing about the bytes. */
function strongEtag(value: string | null): string | undefined {
  if (!value || value.startsWith("W/")) return undefined;
  return value.replace(/^"|"$/g, "").toLowerCase();
}

function optionalInt(value: string | null): number | undefined {
  return value !== null && /^\d{1,15}$/.test(value) ? Number(value) : undefined;
}

function contentRange(value: string | null): { start: number; total: number | undefined } | undefined {
  const m = /^bytes (\d+)-(\d+)\/(\d+|\*)$/.exec(value ?? "");
  if (!m) return undefined;
  return { start: Number(m[1]), total: m[3] === "*" ? undefined : Number(m[3]) };
}

/** Whether two descriptions of a file disagree on something both of them state. */
function differs(a: PartOrigin | undefined, b: PartOrigin): boolean {
  if (!a) return false;
  return (
    (a.size !== undefined && b.size !== undefined && a.size !== b.size) ||
    (a.sha256 !== undefined && b.sha256 !== undefined && a.sha256 !== b.sha256) ||
    (a.etag !== undefined && b.etag !== undefined && a.etag !== b.etag)
  );
}
