/**
 * This node's announcement: what it tells every peer about itself. The content is derived from the
 * node's state when asked; `seq` moves only when the content changed, so peers can tell a newer
 * announcement from an older one and a heartbeat repeats the same one.
 */
import { randomUUID } from "node:crypto";
import type { Announcement } from "./messages.ts";

export type AnnouncementContent = Omit<Announcement, "seq" | "instance">;

export class AnnouncementSource {
  private seq = 0;
  private last: string | undefined;
  readonly instance = randomUUID();

  constructor(private readonly content: () => AnnouncementContent) {}

  /** The current announcement; `changed` says whether it differs from the last one handed out. */
  current(): { announcement: Announcement; changed: boolean } {
    const content = this.content();
    const key = JSON.stringify(content);
    const changed = key !== this.last;
    if (changed) {
      this.last = key;
      this.seq++;
    }
    return { announcement: { ...content, instance: this.instance, seq: this.seq }, changed };
  }
}
