/**
 * Which draft model a load uses for speculative decoding (pure): the load request's `draft_model`,
 * else the target's `draft` in models.json, else none. A draft is always a model the store knows,
 * named by its name: a request never hands llama-server a path. The draft must be a text model that
 * can load as it is; a target that is not a text model takes no draft.
 */
import { existsSync } from "node:fs";
import { isSafeModelName } from "./model-transfer.ts";
import type { ModelInfo } from "./model-store.ts";

export type DraftTarget = Pick<ModelInfo, "name" | "type" | "draft">;
export type DraftCandidate = Pick<ModelInfo, "name" | "type" | "problem" | "path" | "facts" | "files">;

export type DraftChoice<C extends DraftCandidate = DraftCandidate> =
  | { ok: true; draft: C | undefined; from: "request" | "models.json" | "none" }
  | { ok: false; error: string };

/** Why `name` cannot be a model name (it reads as a path), or undefined when it can. */
export function draftNameProblem(name: string): string | undefined {
  const pathLike = !isSafeModelName(name) || name.startsWith("~") || /^[A-Za-z]:/.test(name) || /\.gguf$/i.test(name);
  return pathLike ? `"${name}" looks like a path; a draft is named by a model name this node lists (GET /v1/models)` : undefined;
}

/**
 * The draft for a load of `target`: `requested` (the load's `draft_model`) wins over the target's
 * models.json `draft`. `known` is every model the store lists; the draft is looked up there by name.
 * A draft llama-server cannot open fails its target's load, so one whose header was unreadable or
 * whose files are not all there (a partial copy) is refused here, before anything is evicted for it.
 */
export function chooseDraft<C extends DraftCandidate>(target: DraftTarget, requested: string | undefined, known: readonly C[], exists: (path: string) => boolean = existsSync): DraftChoice<C> {
  const name = requested ?? target.draft;
  if (name === undefined) return { ok: true, draft: undefined, from: "none" };
  const from = requested !== undefined ? "request" : "models.json";
  // Where the name came from, so the error says what to fix.
  const named = from === "request" ? `draft_model "${name}"` : `models.json names draft "${name}" for "${target.name}", but`;
  const fail = (why: string): DraftChoice<C> => ({ ok: false, error: from === "request" ? `${named}: ${why}` : `${named} ${why}; fix its entry in models.json` });
  const pathProblem = draftNameProblem(name);
  if (pathProblem) return fail(pathProblem);
  if (target.type !== "llm") return fail(`"${target.name}" is a ${target.type} model; only text models take a draft`);
  const draft = known.find((m) => m.name === name);
  if (!draft) {
    const text = known.filter((m) => m.type === "llm").map((m) => m.name);
    return fail(`no model of that name on this node; text models here: ${text.length ? text.join(", ") : "none"}`);
  }
  if (draft.type !== "llm") return fail(`"${name}" is a ${draft.type} model; a draft must be a text model with the target's vocabulary`);
  if (draft.problem) return fail(`"${name}" cannot load: ${draft.problem}`);
  if (draft.facts === undefined) return fail(`"${name}" cannot load: its GGUF header could not be read`);
  const missing = draft.files.filter((f) => !exists(f));
  if (missing.length) return fail(`"${name}" cannot load: missing file(s) ${missing.join(", ")}`);
  return { ok: true, draft, from };
}
