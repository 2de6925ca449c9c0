/**
 * A conversation's KV cache outlives its server on this node. When a text model's server is
 * unloaded (idle, evicted for another, reloaded, the node stopping), llama-server saves each of its
 * slots that holds a prompt (`POST /slots/N?action=save`) into a folder the node owns; when the
 * model loads again, the newest saved slots are restored into its slots before it takes a request,
 * and llama-server's own slot choice (the longest common prefix) gives a returning conversation the
 * slot that holds its prefix: its next turn reads only what is new instead of the whole prompt.
 *
 * Files are kept per llama.cpp build and per model content identity (a cache is only ever read by
 * the build and the weights that wrote it), named by a hash of their tokens, under a disk budget
 * for all of them (least recently used go first), each with its size and SHA-256 beside it: a file
 * that no longer matches is dropped before llama-server reads it (it aborts on a state cut short).
 * Every name is the node's own: nothing of a request becomes a path. Every call to llama-server has
 * a deadline; a save or restore that fails costs the conversation its cache, never its answer.
 */
import { closeSync, existsSync, mkdirSync, openSync, readdirSync, readFileSync, readSync, renameSync, rmSync, statSync, utimesSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Log } from "../base/log.ts";
import type { ModelInfo } from "../models/model-store.ts";
import { overBudget, toRestore, type SavedSlot } from "./slot-budget.ts";
import { isSlotFileName, readSlotFileHead, SLOT_FILE_HEAD_BYTES, slotFileName } from "./slot-file.ts";

/** The state dir's folder for saved slots. */
export const SLOT_CACHE_DIR = "kv-cache";
/** A slot holding fewer tokens than this is not worth a file: reading it again takes no time. */
export const MIN_SAVED_TOKENS = 64;
/** One save or restore of one slot (llama-server writes or reads the whole KV of the slot). */
const SLOT_CALL_MS = 30_000;
/** The name a slot has while llama-server (or a member) writes it: what a save cut short leaves is removed at the next load. */
const SAVING = "saving-";
/** A name for a slot file being written into a model's folder. */
const savingName = (label: string): string => `${SAVING}${label}.bin`;
/** Asking llama-server which slots it has. */
const LIST_MS = 2_000;

/** What the node counts of its saved slots (`/metrics`). */
export interface SlotCacheCounters {
  saved: number;
  restored: number;
  savedBytes: number;
  restoredBytes: number;
  /** Saves and restores that failed (the conversation's next turn is read whole). */
  failed: number;
}

export interface SlotCacheOptions {
  /** The folder every build's and model's saved slots live under (in the state dir). */
  root: string;
  /** The llama.cpp build the node runs (`LlamaBinaries.build`); none known: nothing is saved. */
  build: string | undefined;
  /** Disk for all saved slots together; 0 turns saving off. */
  budgetBytes: number;
  /** The content identity of a model's files, once worked out (`models/model-identities.ts`). */
  identityOf: (m: ModelInfo) => string | undefined;
  log: Log;
}

/** What the cache needs of a running server. */
export interface SlotServer {
  readonly model: string;
  readonly url: string;
  readonly headers: Readonly<Record<string, string>>;
  /** The folder it was started with (`--slot-save-path`), when it saves slots at all. */
  readonly slotDir: string | undefined;
  /** Aborted when its process is gone. */
  readonly gone: AbortSignal;
}

interface SlotInfo {
  id: number;
  is_processing?: boolean;
}

/** llama-server answered a save or restore with an error (as opposed to not answering). */
class SlotCallRefused extends Error {}
/** A saved slot whose bytes are not those that were saved. */
class SlotFileDamaged extends Error {}

/** Where a saved slot's bytes and hash are kept, beside it. */
const sumPath = (path: string) => `${path}.sum`;

function removeSaved(path: string): void {
  rmSync(path, { force: true });
  rmSync(sumPath(path), { force: true });
}

async function fileSha256(path: string): Promise<string> {
  const hasher = new Bun.CryptoHasher("sha256");
  for await (const chunk of Bun.file(path).stream()) hasher.update(chunk);
  return hasher.digest("hex");
}

/** Why a saved slot is not what was saved (its size or hash, or no record of them), or undefined when it is. */
async function damageOf(path: string): Promise<string | undefined> {
  let sum: { bytes?: unknown; sha256?: unknown };
  try {
    sum = JSON.parse(readFileSync(sumPath(path), "utf8")) as typeof sum;
  } catch {
    return "no record of its size and hash";
  }
  const bytes = statSync(path).size;
  if (bytes !== sum.bytes) return `it has ${bytes} bytes, ${String(sum.bytes)} were saved`;
  if ((await fileSha256(path)) !== sum.sha256) return "its bytes changed since it was saved";
  return undefined;
}

/** A build string as a folder name: as it is when it is one, else its hash. */
const folderOf = (text: string) => (/^[\w.-]{1,100}$/.test(text) ? text : new Bun.CryptoHasher("sha256").update(text).digest("hex").slice(0, 32));

export class SlotCache {
  readonly counters: SlotCacheCounters = { saved: 0, restored: 0, savedBytes: 0, restoredBytes: 0, failed: 0 };
  /** Saves under way, by folder. */
  private readonly saving = new Map<string, Promise<void>>();

  constructor(private readonly o: SlotCacheOptions) {
    if (o.budgetBytes > 0 && o.build !== undefined) this.dropOtherBuilds(folderOf(o.build));
  }

  /** The folder `model`'s server saves its slots in (made now); none when saving is off or its identity is not known yet. */
  folderFor(model: ModelInfo): string | undefined {
    if (this.o.budgetBytes <= 0 || model.type !== "llm") return undefined;
    const identity = this.o.identityOf(model);
    const dir = identity === undefined ? undefined : this.dirOf(identity);
    if (dir === undefined) return undefined;
    // Conversations are in these files: the node's user alone reads them, as the rest of the state dir.
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    // What a save cut short (the node killed meanwhile) left.
    // Its sums too: a fetched cache held for one restore keeps one beside it.
    for (const name of entries(dir)) if (name.startsWith(SAVING)) rmSync(join(dir, name), { force: true });
    return dir;
  }

  /** Saves every idle slot of `server` that holds a prompt; then keeps the budget. Never throws: a failure costs only the caches. */
  async save(server: SlotServer): Promise<void> {
    const dir = server.slotDir;
    if (!dir) return;
    // A member asking for a conversation while its server is being unloaded waits for this save (`whenSaved`).
    const saving = this.saveInto(server, dir);
    this.saving.set(dir, saving);
    try {
      await saving;
    } finally {
      if (this.saving.get(dir) === saving) this.saving.delete(dir);
    }
  }

  /** Once the save of the model content `identity`'s slots now under way (an unload's, a member's) is done. */
  async whenSaved(identity: string): Promise<void> {
    const dir = this.dirOf(identity);
    if (dir !== undefined) await this.saving.get(dir);
  }

  private async saveInto(server: SlotServer, dir: string): Promise<void> {
    const slots = await this.slots(server).catch((err: unknown) => void this.o.log.warn("could not list the model's slots to save them", { model: server.model, error: (err as Error).message }));
    if (!slots) return;
    for (const slot of slots) {
      if (slot.is_processing) continue;
      const temp = savingName(String(slot.id));
      try {
        const res = await this.call(server, slot.id, "save", temp);
        const saved = Number((res as { n_saved?: unknown }).n_saved ?? 0);
        if (saved < MIN_SAVED_TOKENS) {
          rmSync(join(dir, temp), { force: true });
          continue;
        }
        const bytes = (await this.adopt(dir, join(dir, temp))).bytes;
        this.counters.saved++;
        this.counters.savedBytes += bytes;
      } catch (err) {
        rmSync(join(dir, temp), { force: true });
        this.counters.failed++;
        this.o.log.warn("could not save a slot's KV cache; its conversation is read whole next time", { model: server.model, slot: slot.id, error: (err as Error).message });
      }
    }
    this.keepBudget();
  }

  /** Restores the newest saved slots of `server`'s model into its slots, one each, before it takes a request. Never throws. */
  async restore(server: SlotServer): Promise<void> {
    const dir = server.slotDir;
    if (!dir) return;
    const slots = await this.slots(server).catch((err: unknown) => void this.o.log.warn("could not list the model's slots to restore them", { model: server.model, error: (err as Error).message }));
    if (!slots) return;
    const files = toRestore(savedIn(dir), slots.length);
    for (const [i, file] of files.entries()) await this.restoreInto(server, i, file.path);
  }

  /** Restores the saved slot at `path` (in `server`'s folder) into its slot `slot`; whether it took. Never throws. */
  async restoreInto(server: SlotServer, slot: number, path: string): Promise<boolean> {
    const dir = server.slotDir;
    if (!dir || !path.startsWith(`${dir}/`)) return false;
    try {
      const damage = await damageOf(path);
      if (damage !== undefined) throw new SlotFileDamaged(damage);
      const bytes = statSync(path).size;
      await this.call(server, slot, "restore", path.slice(dir.length + 1));
      const now = new Date();
      utimesSync(path, now, now);
      this.counters.restored++;
      this.counters.restoredBytes += bytes;
      return true;
    } catch (err) {
      this.counters.failed++;
      // Damaged, refused (another context size), or the server died reading it: of no use to a
      // later load either. One llama-server could not be asked about (a deadline) may be.
      const drop = err instanceof SlotFileDamaged || err instanceof SlotCallRefused || server.gone.aborted;
      if (drop) removeSaved(path);
      this.o.log.warn(drop ? "a saved slot could not be restored; dropped it" : "could not restore a saved slot", { model: server.model, slot, error: (err as Error).message });
      return false;
    }
  }

  /**
   * Keeps the slot file llama-server (or a member, `kv/`) wrote at `temp` in `dir` as a saved slot
   * (`sha256`: its hash, when the writer worked it out as it wrote):
   * named by its tokens, with its bytes and their hash beside it (a file cut or changed since is
   * never handed to llama-server, which aborts on a state that ends early instead of refusing it).
   */
  async adopt(dir: string, temp: string, sha256?: string): Promise<{ path: string; bytes: number }> {
    const path = join(dir, slotFileName(tokenHash(temp)));
    const sum = { bytes: statSync(temp).size, sha256: sha256 ?? (await fileSha256(temp)) };
    renameSync(temp, path);
    writeFileSync(sumPath(path), JSON.stringify(sum));
    return { path, bytes: sum.bytes };
  }

  /** A new name in `dir` for a cache a member sends (`kv/`): a fetch cut short leaves it, and the next load removes it. */
  fetchPath(dir: string): string {
    return join(dir, savingName(`fetch-${crypto.randomUUID()}`));
  }

  /** The saved slots of the model content `identity`, newest first; none when this node keeps no folder of it. */
  savedOf(identity: string): string[] | undefined {
    const dir = this.dirOf(identity);
    if (dir === undefined || !existsSync(dir)) return undefined;
    return savedIn(dir)
      .sort((a, b) => b.usedAt - a.usedAt)
      .map((s) => s.path);
  }

  /** Whether a saved slot is still what was saved; one that is not is dropped. */
  async intact(path: string): Promise<boolean> {
    const damage = await damageOf(path).catch(() => "it is gone");
    if (damage === undefined) return true;
    removeSaved(path);
    return false;
  }

  /** Removes a saved slot (and its sum) that is not to be kept: a fetched cache llama-server did not take, or one for one request only. */
  discard(path: string): void {
    removeSaved(path);
  }

  /**
   * A fetched cache held for one restore only (`kv/`): its size and hash beside it, under its
   * temporary name, so it is never listed as a saved slot, offered, restored at a load or counted;
   * `discard` removes it once restored.
   */
  async sealFetched(temp: string, sha256: string): Promise<{ path: string; bytes: number }> {
    const bytes = statSync(temp).size;
    writeFileSync(sumPath(temp), JSON.stringify({ bytes, sha256 }));
    return { path: temp, bytes };
  }

  /** Empties a slot of `server` (llama-server's erase): what a cache restored for one request left in it goes. Never throws. */
  async erase(server: SlotServer, slot: number): Promise<void> {
    try {
      await this.call(server, slot, "erase", "");
    } catch (err) {
      this.o.log.warn("could not empty a slot a member's cache was restored into", { model: server.model, slot, error: (err as Error).message });
    }
  }

  /** The saved slots of a model content no model of this node has any more. */
  drop(identity: string): void {
    const dir = this.dirOf(identity);
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  }

  /** The folder of model content `identity`'s saved slots for this build; none when the build is not known or the identity is not one. */
  private dirOf(identity: string): string | undefined {
    if (this.o.build === undefined || !/^[0-9a-f]{16,128}$/.test(identity)) return undefined;
    return join(this.o.root, folderOf(this.o.build), identity);
  }

  /** The saved slots of every model, least recently used deleted until they fit the budget. */
  keepBudget(): void {
    const all = this.allFiles();
    for (const path of overBudget(all, this.o.budgetBytes)) removeSaved(path);
  }

  private allFiles(): SavedSlot[] {
    const out: SavedSlot[] = [];
    for (const build of entries(this.o.root)) for (const model of entries(join(this.o.root, build))) out.push(...savedIn(join(this.o.root, build, model)));
    return out;
  }

  /** Caches of another llama.cpp build are of no use to this one: they go at start. */
  private dropOtherBuilds(current: string): void {
    for (const build of entries(this.o.root)) if (build !== current) rmSync(join(this.o.root, build), { recursive: true, force: true });
  }

  private async slots(server: SlotServer): Promise<SlotInfo[]> {
    const res = await fetch(`${server.url}/slots`, { headers: server.headers, signal: AbortSignal.timeout(LIST_MS) });
    if (!res.ok) {
      await res.body?.cancel();
      throw new Error(`llama-server answered ${res.status} for its slots`);
    }
    const body: unknown = await res.json();
    if (!Array.isArray(body)) throw new Error("llama-server's slots are not a list");
    return body.filter((s): s is SlotInfo => typeof s === "object" && s !== null && Number.isInteger((s as SlotInfo).id) && (s as SlotInfo).id >= 0);
  }

  private async call(server: SlotServer, slot: number, action: "save" | "restore" | "erase", filename: string): Promise<unknown> {
    const res = await fetch(`${server.url}/slots/${slot}?action=${action}`, {
      method: "POST",
      headers: { ...server.headers, "content-type": "application/json" },
      body: JSON.stringify({ filename }),
      signal: AbortSignal.timeout(SLOT_CALL_MS),
    });
    const text = await res.text();
    if (!res.ok) throw new SlotCallRefused(`llama-server answered ${res.status} to ${action} slot ${slot}: ${text.slice(0, 200)}`);
    return JSON.parse(text) as unknown;
  }
}

/** The hash of a slot file's token area (its head is checked first; the KV state is never read). */
function tokenHash(path: string): string {
  const fd = openSync(path, "r");
  try {
    const size = statSync(path).size;
    const head = new Uint8Array(SLOT_FILE_HEAD_BYTES);
    readSync(fd, head, 0, head.length, 0);
    const parsed = readSlotFileHead(head, size);
    if ("error" in parsed) throw new Error(parsed.error);
    const hasher = new Bun.CryptoHasher("sha256");
    const chunk = new Uint8Array(1 << 20);
    for (let at = SLOT_FILE_HEAD_BYTES; at < parsed.tokenEnd; ) {
      const n = readSync(fd, chunk, 0, Math.min(chunk.length, parsed.tokenEnd - at), at);
      if (n <= 0) throw new Error("the slot file ended inside its tokens");
      hasher.update(chunk.subarray(0, n));
      at += n;
    }
    return hasher.digest("hex");
  } finally {
    closeSync(fd);
  }
}

function entries(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}

/** The slot files the node saved in `dir` (nothing else there is read). */
function savedIn(dir: string): SavedSlot[] {
  return entries(dir)
    .filter(isSlotFileName)
    .flatMap((name) => {
      try {
        const st = statSync(join(dir, name));
        return [{ path: join(dir, name), bytes: st.size, usedAt: st.mtimeMs }];
      } catch {
        return [];
      }
    });
}
