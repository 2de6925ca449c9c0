/**
 * The system unit's account: which GPU groups it joins, how the user is made, which folders it may be
 * given, and (as root) that handing them over never follows a link out of them.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { chmodSync, lstatSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { blockedFor, nologinShell, ownershipRefusal, supplementaryGroups, useraddArgs, type PathNeed } from "../../service/system-user.ts";
import { giveTree } from "../../commands/service-account.ts";

const temps: string[] = [];
afterAll(() => {
  for (const t of temps) rmSync(t, { recursive: true, force: true });
});

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "mesh-account-"));
  chmodSync(dir, 0o777);
  temps.push(dir);
  return dir;
}

describe("the system unit's account", () => {
  const groups: [present: string[], chosen: string[]][] = [
    [[], []],
    [["video"], ["video"]],
    [["render"], ["render"]],
    [["render", "video", "audio", "docker"], ["video", "render"]],
    [["audio", "wheel"], []],
  ];
  test.each(groups)("groups %p -> SupplementaryGroups %p", (present, chosen) => expect(supplementaryGroups(new Set(present))).toEqual(chosen));

  test("useradd: a system user with its group, the state dir as home, no login", () => {
    expect(useraddArgs("/usr/sbin/useradd", "/var/lib/mesh", "/usr/sbin/nologin")).toEqual([
      "/usr/sbin/useradd", "--system", "--user-group", "--home-dir", "/var/lib/mesh", "--no-create-home", "--shell", "/usr/sbin/nologin", "mesh",
    ]);
    expect(nologinShell((p) => p === "/sbin/nologin")).toBe("/sbin/nologin");
    expect(nologinShell(() => false)).toBe("/bin/false");
  });

  const modes: Record<string, number> = { "/root": 0o700, "/home": 0o755, "/home/alice": 0o750, "/opt": 0o755, "/opt/mesh": 0o755, "/opt/mesh/mesh": 0o750, "/opt/mesh/main.ts": 0o600, "/var": 0o755, "/var/lib": 0o755, "/usr": 0o755, "/usr/local": 0o755, "/usr/local/bin": 0o755, "/usr/local/bin/mesh": 0o755 };
  const needs: [need: PathNeed, blocked: string | undefined][] = [
    [{ path: "/usr/local/bin/mesh", access: "x" }, undefined],
    [{ path: "/var/lib/mesh", access: "dir" }, undefined],
    [{ path: "/var/lib/mesh/models/deep/er", access: "dir" }, undefined],
    [{ path: "/root/.mesh", access: "dir" }, "/root lets no other user in (mode 0700)"],
    [{ path: "/root/.bun/bin/bun", access: "x" }, "/root lets no other user in (mode 0700)"],
    [{ path: "/home/alice/models", access: "dir" }, "/home/alice lets no other user in (mode 0750)"],
    [{ path: "/opt/mesh/mesh", access: "x" }, "/opt/mesh/mesh is not executable by other users (mode 0750)"],
    [{ path: "/opt/mesh/main.ts", access: "r" }, "/opt/mesh/main.ts is not readable by other users (mode 0600)"],
    [{ path: "/opt/mesh", access: "dir" }, undefined],
  ];
  test.each(needs)("%p -> %p", (need, blocked) => expect(blockedFor(need, (p) => modes[p])).toBe(blocked));

  const homes = ["/root", "/home/alice", "/srv/bob"];
  const owned: [dir: string, refused: string | undefined][] = [
    ["/var/lib/mesh", undefined],
    ["/var/lib/mesh/models", undefined],
    ["/srv/models", undefined],
    ["/home/alice/models", undefined],
    ["/", "/ is a top-level folder"],
    ["/srv", "/srv is a top-level folder"],
    ["/var/lib", "/var/lib holds other programs' data"],
    ["/var/cache", "/var/cache holds other programs' data"],
    ["/etc/mesh", "/etc/mesh is part of the system (/etc)"],
    ["/usr/local/share/models", "/usr/local/share/models is part of the system (/usr)"],
    ["/root", "/root is a top-level folder"],
    ["/home/alice", "/home/alice is a user's home"],
    ["/home/carol", "/home/carol is a user's home"],
    ["/srv/bob", "/srv/bob is a user's home"],
  ];
  test.each(owned)("giving %p to mesh: %p", (dir, refused) => expect(ownershipRefusal(dir, homes)).toBe(refused));
});

/**
 * giveTree runs as root over folders the mesh user owns and may change meanwhile: whatever it finds
 * there, links included, must not lead it to give anything outside them. Root only (only root gives
 * files away); the uid and gid are arbitrary numbers, no account is needed.
 */
describe.skipIf(process.getuid?.() !== 0)("giveTree: the mesh user's folders, never what their links point at", () => {
  const account = { uid: 4242, gid: 4343 };
  const owners = (...paths: string[]) => paths.map((p) => `${lstatSync(p).uid}:${lstatSync(p).gid}`);
  /** A tree to give and, beside it, a folder and a file it must not touch. */
  function layout() {
    const root = tempDir();
    const [tree, outside, file] = [join(root, "tree"), join(root, "outside"), join(root, "outside-file")];
    mkdirSync(join(tree, "sub"), { recursive: true });
    mkdirSync(outside);
    writeFileSync(join(outside, "secret"), "");
    writeFileSync(file, "");
    return { root, tree, outside, file, untouched: [outside, join(outside, "secret"), file] };
  }

  test("links inside are given themselves; their folder and file are not", () => {
    const { root, tree, outside, file, untouched } = layout();
    writeFileSync(join(tree, "sub", "f"), "");
    symlinkSync(outside, join(tree, "sub", "to-dir"));
    symlinkSync(file, join(tree, "to-file"));
    giveTree(tree, account, true);
    const given = [tree, join(tree, "sub"), join(tree, "sub", "f"), join(tree, "sub", "to-dir"), join(tree, "to-file")];
    expect(owners(...given)).toEqual(given.map(() => "4242:4343"));
    expect(owners(...untouched)).toEqual(untouched.map(() => "0:0"));
    // Without `recursive`, the folder alone; a link given in its place is given itself, not followed.
    const models = join(root, "models");
    mkdirSync(models);
    writeFileSync(join(models, "m.gguf"), "");
    giveTree(models, account, false);
    expect(owners(models, join(models, "m.gguf"))).toEqual(["4242:4343", "0:0"]);
    const link = join(root, "link");
    symlinkSync(outside, link);
    giveTree(link, account, true);
    giveTree(link, account, false);
    expect(owners(link, ...untouched)).toEqual(["4242:4343", ...untouched.map(() => "0:0")]);
  });

  test("folders swapped for links while it walks never lead it outside", async () => {
    const { root, tree, outside, untouched } = layout();
    // Each swapper turns its folder into a link to `outside` and back, as fast as it can. A race, so
    // no proof: the former walk (lstat, then readdir and lchown by path) gave `outside` away within
    // these 2 s in about one run of four on a 2-core machine; chown's walk cannot, in any run.
    const swapper = join(root, "swap.ts");
    writeFileSync(
      swapper,
      `import { renameSync, symlinkSync } from "node:fs";
const [d, until] = [process.argv[2], Number(process.argv[3])];
symlinkSync(${JSON.stringify(outside)}, d + ".link");
while (Date.now() < until) {
  renameSync(d, d + ".held");
  renameSync(d + ".link", d);
  renameSync(d, d + ".link");
  renameSync(d + ".held", d);
}
`,
    );
    const until = Date.now() + 2_000;
    const dirs = [0, 1, 2, 3].map((k) => join(tree, `d${k}`));
    for (const d of dirs) {
      mkdirSync(d);
      writeFileSync(join(d, "f"), "");
    }
    const swappers = dirs.map((d) => Bun.spawn([process.execPath, swapper, d, String(until)], { stdout: "ignore", stderr: "inherit" }));
    let runs = 0;
    while (Date.now() < until) {
      try {
        giveTree(tree, account, true);
      } catch {
        // A folder caught between two renames is missing for a moment; chown says so and stops.
      }
      runs++;
      await Bun.sleep(0);
    }
    expect(await Promise.all(swappers.map((s) => s.exited))).toEqual([0, 0, 0, 0]);
    expect(runs).toBeGreaterThan(0);
    expect(owners(...untouched)).toEqual(untouched.map(() => "0:0"));
    // Once the tree holds still, it is all given, links themselves included.
    giveTree(tree, account, true);
    const given = dirs.flatMap((d) => [d, join(d, "f"), `${d}.link`]);
    expect(owners(tree, ...given)).toEqual([tree, ...given].map(() => "4242:4343"));
  }, 30_000);
});
