/**
 * When this node first saw each node's server of each model answer, its own included: what it saw
 * itself, not what anyone said of when. A server that came up before ours was there first (ours
 * was loaded on a view that had not heard of it), so ours gives way; one that claims to answer
 * after ours did never takes the model from us (`mesh/election.ts`, `yieldsTo`).
 */
import type { NodeView } from "../mesh/catalog.ts";

export class ServingSince {
  private readonly since = new Map<string, number>();
  private tick = 0;

  /** Notes the servers `views` show answering now; one that stopped is forgotten (it starts afresh when it answers again). */
  saw(views: readonly NodeView[]): void {
    const now = ++this.tick;
    const seen = new Set<string>();
    for (const v of views) {
      for (const model of v.ready) {
        const key = `${v.nodeId}\0${model}`;
        seen.add(key);
        if (!this.since.has(key)) this.since.set(key, now);
      }
    }
    for (const key of this.since.keys()) if (!seen.has(key)) this.since.delete(key);
  }

  /** Whether `other`'s server of `model` was seen answering before (or as) `self`'s was. */
  answeredFirst(other: string, self: string, model: string): boolean {
    const theirs = this.since.get(`${other}\0${model}`);
    const ours = this.since.get(`${self}\0${model}`);
    return theirs !== undefined && (ours === undefined || theirs <= ours);
  }
}
