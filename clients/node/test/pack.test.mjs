// `npm pack` makes a package that installs into an empty folder, where a ten-line
// TypeScript script, checked by `tsc --strict`, runs a boxed command and a hook.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { COMMAND, PACKAGE, TSC, world } from "./world.mjs";

const SCRIPT = `import { Serve } from "harness-sandbox-client";
const hs = await Serve.start({ command: JSON.parse(process.env.HS_CMD ?? '["harness-sandbox"]') });
await hs.open();
const run = await hs.run({ argv: ["sh", "-c", "echo boxed in $(pwd)"] });
const hook = await hs.hook({ event: "PreToolUse", tool: "bash", input: { command: "ls" } });
console.log(\`run: exit \${run.exit}: \${run.stdout.trim()}\`);
console.log(\`hook: \${hook.outcome}\`);
await hs.close();
`;

function npm(args, cwd, env) {
  const done = spawnSync("npm", [...args, "--no-audit", "--no-fund", "--loglevel=error"],
    { cwd, env, encoding: "utf8" });
  assert.equal(done.status, 0, `npm ${args.join(" ")}: ${done.stdout}${done.stderr}`);
  return done.stdout;
}

test("the packed client installs into an empty folder and runs a boxed command", (t) => {
  const w = world(t);
  const env = { ...w.env, npm_config_cache: join(w.root, "npm-cache"),
    npm_config_update_notifier: "false" };
  npm(["pack", "--pack-destination", w.root], PACKAGE, env);
  const tarball = readdirSync(w.root).find((name) => name.endsWith(".tgz"));
  assert.ok(tarball);
  const app = w.project;
  writeFileSync(join(app, "package.json"), JSON.stringify({ name: "app", type: "module",
    private: true }));
  npm(["install", "--offline", join(w.root, tarball)], app, env);
  writeFileSync(join(app, "main.ts"), SCRIPT);
  // process declared here: the folder has no @types/node.
  writeFileSync(join(app, "env.d.ts"),
    "declare const process: { env: Record<string, string | undefined> };\n");
  const tsc = spawnSync(process.execPath, [TSC, "--strict", "--target", "es2022",
    "--module", "nodenext", "main.ts", "env.d.ts"], { cwd: app, encoding: "utf8" });
  assert.equal(tsc.status, 0, tsc.stdout + tsc.stderr);
  const ran = spawnSync(process.execPath, ["main.js"], { cwd: app, encoding: "utf8",
    env: { ...w.env, HS_CMD: JSON.stringify(COMMAND) } });
  assert.equal(ran.status, 0, ran.stderr);
  assert.equal(ran.stdout, `run: exit 0: boxed in ${app}\nhook: allowed\n`);
});
