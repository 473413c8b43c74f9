// What the tests share: the harness-sandbox command, and a world for one server (a
// project and an empty user config, in a temporary folder).
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

export const PACKAGE = join(dirname(fileURLToPath(import.meta.url)), "..");
// typescript, a devDependency (scripts/_setup.sh installs it).
export const TSC = join(PACKAGE, "node_modules", "typescript", "bin", "tsc");

// HS_SERVE_CLI: the command as a JSON argv (the Python tests give their interpreter's
// `-m launchers`); default `harness-sandbox` on PATH.
export const COMMAND = process.env.HS_SERVE_CLI ? JSON.parse(process.env.HS_SERVE_CLI)
  : ["harness-sandbox"];

export function world(t) {
  const root = mkdtempSync(join(process.env.TMPDIR ?? tmpdir(), "hs-node-client-"));
  const project = join(root, "project");
  const home = join(root, "harness-home");
  mkdirSync(project);
  mkdirSync(home);
  writeFileSync(join(home, "config.toml"), "");
  const env = { ...process.env, HARNESS_HOME: home };
  delete env.XDG_CONFIG_HOME;
  t?.after(() => rmSync(root, { recursive: true, force: true }));
  return { root, project, home, env, options: { command: COMMAND, project, env } };
}
