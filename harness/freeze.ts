/** Holding a request "in flight" deterministically: stop the llama-server that serves it. */
import { chat, server } from "./api.ts";
import type { TestNode } from "./node.ts";

/** Loads `model`, then SIGSTOPs its llama-server; `thaw()` resumes it (and is safe once it is gone). */
export async function frozen(n: TestNode, model: string): Promise<{ pid: number; thaw: () => void }> {
  const res = await chat(n, model);
  if (res.status !== 200) throw new Error(`loading ${model}: ${res.status} ${await res.text()}`);
  const { pid } = await server(n, model);
  process.kill(pid, "SIGSTOP");
  const thaw = () => {
    try {
      process.kill(pid, "SIGCONT");
    } catch {
      // already gone (evicted or killed)
    }
  };
  return { pid, thaw };
}
