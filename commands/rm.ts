/**
 * `mesh rm NAME`: deletes a model mesh downloaded into its models dir. Through the local node when
 * one answers (it refuses a loaded model, and tells the mesh), else here with the same rules:
 * never another tool's store, never a file outside the models dir.
 */
import type { Config } from "../config/config.ts";
import { AdminError, deleteModelFiles, planDelete } from "../node/model-admin.ts";
import { CommandError } from "./common.ts";
import { errorText, localNode, localStore } from "./local-node.ts";

export async function removeModel(config: Config, name: string): Promise<void> {
  const node = await localNode(config);
  if (node) {
    const { url, headers } = node;
    const res = await fetch(`${url}/api/v1/delete`, {
      method: "POST",
      headers: { "content-type": "application/json", ...headers },
      body: JSON.stringify({ model_name: name }),
      signal: AbortSignal.timeout(60_000),
    });
    if (!res.ok) throw new CommandError(await errorText(res));
    const body = (await res.json()) as { files?: string[] };
    console.log(`deleted ${name} (${body.files?.length ?? 0} file${body.files?.length === 1 ? "" : "s"}) through the node at ${url}`);
    return;
  }
  const models = await localStore(config).refresh();
  try {
    const plan = planDelete(name, models, config.modelsDir, { loaded: false, pulling: false });
    await deleteModelFiles(plan, config.modelsDir);
    console.log(`deleted ${name} (${plan.files.length} file${plan.files.length === 1 ? "" : "s"}) from ${config.modelsDir}`);
  } catch (err) {
    if (err instanceof AdminError) throw new CommandError(err.message);
    throw err;
  }
}
