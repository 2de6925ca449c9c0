/** Models other nodes serve, and how to send a request to one of them. */
export interface RemoteModels {
  /** Each model some peer's API answers for, with the peer that does (the smallest id among several). */
  models(): { name: string; peerId: string }[];
  hostFor(model: string): string | undefined;
  forward(peerId: string, req: { method: string; path: string; headers: Record<string, string>; body: Uint8Array }, signal: AbortSignal): Promise<Response>;
}
