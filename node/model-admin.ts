/**
 * Pulling and deleting models on a running node, for every API and the CLI alike. A pull runs
 * `pullModel` into the models dir with the node's Hugging Face settings (read once at start), then
 * rescans the store and tells the node (announce, reconcile), so the mesh hears of the model at once.
 *
 * At most `maxPulls` run at once (a further one is answered 429, not queued out of sight), and one
 * per name: a second request for a name being pulled from the same reference joins the first and
 * sees its progress; from another reference it is refused (409). A client that goes away leaves a
 * pull others still wait on; when the last one goes, the pull is cancelled (what it staged is kept,
 * so the next pull resumes it).
 *
 * A delete removes only what `deletePlan` allows (mesh's own models dir, nothing loaded, nothing
 * outside it, nothing another model still uses), then its registry entries and the folders it left empty.
 */
import { existsSync, realpathSync, rmdirSync, unlinkSync } from "node:fs";
import { basename, dirname, join, resolve } from "node:path";
import type { Log } from "../base/log.ts";
import type { HubConfig } from "../models/hf-hub.ts";
import { deletePlan, foldersToPrune, registryWithout, type DeletePlan } from "../models/model-delete.ts";
import { defaultModelName, pullableRef } from "../models/model-ref.ts";
import type { ModelInfo, ModelStore } from "../models/model-store.ts";
import { isSafeModelName } from "../models/model-transfer.ts";
import { linkModelAs, ModelCopyError } from "../models/model-copy.ts";
import { PullError, type PullErrorCode } from "../models/pull-error.ts";
import { pullModel, type PulledModel, type PullProgress } from "../models/pull.ts";
import { REGISTRY_FILE, updateRegistry } from "../models/registry.ts";

const MAX_PULLS = 2;

export type AdminStatus = 400 | 401 | 403 | 404 | 409 | 429 | 499 | 500 | 502 | 507;

/** A pull or delete that did not happen, with the HTTP status and code the APIs answer with. */
export class AdminError extends Error {
  constructor(
    message: string,
    readonly status: AdminStatus,
    readonly code: string,
  ) {
    super(message);
  }
}

/** The status each pull failure answers with (pure). */
export const PULL_ERROR_STATUS: Record<PullErrorCode, AdminStatus> = {
  bad_reference: 400,
  gated: 401,
  not_found: 404,
  quant_not_found: 404,
  no_space: 507,
  name_taken: 409,
  download_failed: 502,
  hash_mismatch: 502,
};

/** What the router uses of the admin: a narrow face, so the API cannot reach past it. */
export interface ModelAdminApi {
  pull(ref: string, name: string | undefined, onProgress: (p: PullProgress) => void, signal: AbortSignal): Promise<PulledModel>;
  remove(name: string): Promise<RemovedModel>;
  /** A second name for a model on this node's disk: its files hard-linked under `dest` in the models dir. */
  copy(source: string, dest: string): Promise<void>;
}

export interface RemovedModel {
  name: string;
  /** Files removed. */
  files: string[];
  /** Files of the model kept because another model uses them. */
  kept: string[];
}

export interface ModelAdminOptions {
  store: Pick<ModelStore, "refresh" | "find" | "modelsDir">;
  /** Loaded or loading on this node: such a model is not deleted. */
  inUse: (name: string) => boolean;
  hub: HubConfig;
  /** After the models on disk changed: announce and reconcile. */
  onChange: () => void;
  /** A model's files were deleted (what the node kept for it goes too). */
  onRemoved?: (name: string) => void;
  log: Log;
  maxPulls?: number;
}

interface Run {
  ref: string;
  latest: PullProgress | undefined;
  subscribers: Set<(p: PullProgress) => void>;
  controller: AbortController;
  done: Promise<PulledModel>;
}

const SCHEME = /^([a-z][a-z0-9+.-]*):/i;

/** Why `ref` cannot be pulled before anything is fetched (pure), or undefined. */
export function refProblem(ref: string): string | undefined {
  if (ref === "") return "a model reference is required (org/repo[:QUANT], org/repo/file.gguf, hf.co/org/repo:QUANT, an https:// URL or a catalog id)";
  if (ref.length > 2048) return `a model reference of ${ref.length} characters is too long`;
  if (/[\x00-\x1f\x7f\s\\]/.test(ref)) return "a model reference holds no spaces, backslashes or control characters";
  const scheme = SCHEME.exec(ref)?.[1]?.toLowerCase();
  // `hf.co/org/repo:Q4_K_M` has a colon too, but no scheme: a scheme is followed by `//`.
  if (scheme && ref.slice(scheme.length + 1).startsWith("//") && scheme !== "https" && scheme !== "http") {
    return `${scheme}: references are not pulled; use an https:// URL or a Hugging Face reference`;
  }
  return undefined;
}

export function pullErrorToAdmin(err: unknown): AdminError {
  if (err instanceof AdminError) return err;
  if (err instanceof PullError) {
    const status = PULL_ERROR_STATUS[err.code] ?? 502;
    // The token that counts is the node's, read when it started, not the client's.
    const message = err.code === "gated" ? `${err.message} (the node pulls with its own token: set HF_TOKEN on the node and restart it)` : err.message;
    return new AdminError(message, status, err.code);
  }
  if ((err as Error)?.name === "AbortError") return new AdminError("the pull was cancelled", 499, "cancelled");
  return new AdminError(`the pull failed: ${err instanceof Error ? err.message : String(err)}`, 500, "pull_failed");
}

/** A file as a real path of its folder plus its own name: a link in the models dir is removed itself, never what it points to. */
function realPathOf(file: string): string {
  try {
    return join(realpathSync(dirname(file)), basename(file));
  } catch {
    return resolve(file);
  }
}

function realDir(dir: string): string {
  try {
    return realpathSync(dir);
  } catch {
    return resolve(dir);
  }
}

/** Whether `name` may be deleted from the models dir, and which files go (the store already rescanned). */
export function planDelete(name: string, models: readonly ModelInfo[], modelsDir: string, state: { loaded: boolean; pulling: boolean }): DeletePlan {
  const plan = deletePlan(
    name,
    models.find((m) => m.name === name),
    { modelsDir: realDir(modelsDir), realPath: realPathOf, loaded: state.loaded, pulling: state.pulling, others: models },
  );
  if (!plan.ok) throw new AdminError(plan.message, plan.status, plan.code);
  return plan;
}

/**
 * Carries out a plan: the files, then the registry entries that named them (under the lock pulls
 * take to write it, so an entry a pull adds meanwhile is not lost), then the folders left empty.
 */
export async function deleteModelFiles(plan: DeletePlan, modelsDir: string): Promise<void> {
  for (const f of plan.files) {
    try {
      unlinkSync(f);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw new AdminError(`could not delete ${f}: ${(err as Error).message}`, 500, "delete_failed");
    }
  }
  if (existsSync(join(modelsDir, REGISTRY_FILE))) await updateRegistry(modelsDir, (raw) => registryWithout(raw, plan.name, plan.files, modelsDir, realPathOf));
  for (const dir of foldersToPrune(realDir(modelsDir), plan.files)) {
    try {
      rmdirSync(dir);
    } catch {
      // not empty: another model's files are there
    }
  }
}

export class ModelAdmin implements ModelAdminApi {
  private readonly runs = new Map<string, Run>();
  private readonly maxPulls: number;

  constructor(private readonly o: ModelAdminOptions) {
    this.maxPulls = o.maxPulls ?? MAX_PULLS;
  }

  async pull(refText: string, nameText: string | undefined, onProgress: (p: PullProgress) => void, signal: AbortSignal): Promise<PulledModel> {
    const ref = refText.trim();
    const problem = refProblem(ref);
    if (problem) throw new AdminError(problem, 400, "bad_reference");
    let name: string;
    try {
      pullableRef(ref);
      name = nameText?.trim() || defaultModelName(ref);
    } catch (err) {
      throw pullErrorToAdmin(err);
    }
    if (!isSafeModelName(name)) throw new AdminError(`"${name.slice(0, 200)}" cannot be a model name: no "..", no leading "/", no empty segments, at most 4 segments`, 400, "invalid_model_name");
    const running = this.runs.get(name);
    if (running && running.ref !== ref) throw new AdminError(`model "${name}" is being pulled from ${running.ref}; wait for it, or pull ${ref} under another name`, 409, "name_taken");
    const run = running ?? this.start(name, ref);
    return this.follow(name, run, onProgress, signal);
  }

  private start(name: string, ref: string): Run {
    if (this.runs.size >= this.maxPulls) {
      throw new AdminError(`this node is pulling ${[...this.runs.keys()].join(" and ")} (at most ${this.maxPulls} at once); try again when one is done`, 429, "too_many_pulls");
    }
    const controller = new AbortController();
    const run: Run = { ref, latest: undefined, subscribers: new Set(), controller, done: Promise.resolve(undefined as never) };
    // In the map before the first await: a request that comes meanwhile joins this run.
    this.runs.set(name, run);
    run.done = (async () => {
      try {
        const existing = await this.o.store.find(name);
        if (existing && existing.store !== "models-dir") {
          throw new AdminError(`the name "${name}" is taken by a model at ${existing.path}; pull under another name (--name, or "model_name" with "checkpoint")`, 409, "name_taken");
        }
        const pulled = await pullModel({
          ref,
          name,
          modelsDir: this.o.store.modelsDir,
          hub: this.o.hub,
          signal: controller.signal,
          log: this.o.log,
          onProgress: (p) => {
            run.latest = p;
            for (const s of run.subscribers) s(p);
          },
        });
        await this.o.store.refresh();
        this.o.onChange();
        this.o.log.info(pulled.alreadyHad ? "model already pulled" : "model pulled", { name: pulled.name, ref, files: pulled.files.length, bytes: pulled.sizeBytes });
        return pulled;
      } catch (err) {
        // Every client went away: the pull stopped for that, whatever it says.
        if (controller.signal.aborted) {
          this.o.log.info("pull cancelled", { name, ref });
          throw new AdminError(`the pull of ${ref} was cancelled: every client that asked for it went away`, 499, "cancelled");
        }
        const e = pullErrorToAdmin(err);
        this.o.log.warn("pull failed", { name, ref, error: e.message });
        throw e;
      } finally {
        this.runs.delete(name);
      }
    })();
    // Nobody may be listening when it fails (every client gone): not an unhandled rejection.
    run.done.catch(() => undefined);
    return run;
  }

  private follow(name: string, run: Run, onProgress: (p: PullProgress) => void, signal: AbortSignal): Promise<PulledModel> {
    run.subscribers.add(onProgress);
    if (run.latest) onProgress(run.latest);
    return new Promise<PulledModel>((resolveOuter, rejectOuter) => {
      const leave = () => {
        run.subscribers.delete(onProgress);
        const still = run.subscribers.size;
        this.o.log.info(still ? "a client stopped following the pull; it goes on" : "no client follows the pull any more; cancelling it (what it downloaded is kept)", { name, still });
        if (still === 0) run.controller.abort();
        rejectOuter(new AdminError("the client went away", 499, "cancelled"));
      };
      if (signal.aborted) return leave();
      signal.addEventListener("abort", leave, { once: true });
      run.done.then(
        (pulled) => {
          signal.removeEventListener("abort", leave);
          run.subscribers.delete(onProgress);
          resolveOuter(pulled);
        },
        (err: unknown) => {
          signal.removeEventListener("abort", leave);
          run.subscribers.delete(onProgress);
          rejectOuter(err);
        },
      );
    });
  }

  async copy(source: string, dest: string): Promise<void> {
    const from = await this.o.store.find(source);
    if (!from) throw new AdminError(`model '${source.slice(0, 200)}' not found on this node`, 404, "model_not_found");
    try {
      linkModelAs(from, dest, this.o.store.modelsDir);
    } catch (err) {
      if (err instanceof ModelCopyError) throw new AdminError(err.message, err.status, "copy_failed");
      throw err;
    }
    await this.o.store.refresh();
    this.o.onChange();
    this.o.log.info("model copied", { from: source, to: dest });
  }

  async remove(name: string): Promise<RemovedModel> {
    if (!isSafeModelName(name)) throw new AdminError(`"${name.slice(0, 200)}" is not a model name (no "..", no leading "/", no empty segments)`, 400, "invalid_model_name");
    const models = await this.o.store.refresh();
    const plan = planDelete(name, models, this.o.store.modelsDir, { loaded: this.o.inUse(name), pulling: this.runs.has(name) });
    await deleteModelFiles(plan, this.o.store.modelsDir);
    await this.o.store.refresh();
    this.o.onRemoved?.(name);
    this.o.onChange();
    this.o.log.info("model deleted", { name, files: plan.files.length, kept: plan.kept.length });
    return { name, files: plan.files, kept: plan.kept };
  }
}
