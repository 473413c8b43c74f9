// The types: protocol.d.ts is what the schema gives (regenerated and compared: a test
// that fails when they drift), and a TypeScript harness compiles with `tsc --strict`.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { generate } from "../scripts/gen-types.mjs";
import { PACKAGE, TSC } from "./world.mjs";

const SCHEMA = join(PACKAGE, "..", "..", "launchers", "serve", "schema.json");

const node = (...args) => spawnSync(process.execPath, args, { encoding: "utf8", cwd: PACKAGE });

test("protocol.d.ts is what the schema gives", () => {
  const done = node("scripts/gen-types.mjs", "--check");
  assert.equal(done.status, 0, done.stderr);
  assert.equal(readFileSync(join(PACKAGE, "protocol.d.ts"), "utf8"),
    generate(JSON.parse(readFileSync(SCHEMA, "utf8"))));
});

test("a schema that changed is caught as drift", (t) => {
  const dir = mkdtempSync(join(tmpdir(), "hs-schema-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const schema = JSON.parse(readFileSync(SCHEMA, "utf8"));
  schema.$defs.run_result.properties.new_field = { type: "string" };
  writeFileSync(join(dir, "schema.json"), JSON.stringify(schema));
  const done = node("scripts/gen-types.mjs", "--check", "--schema", join(dir, "schema.json"));
  assert.equal(done.status, 1);
  assert.match(done.stderr, /drifted/);
});

test("a keyword the generator does not know is an error, not a silent any", () => {
  const schema = { $defs: { x: { type: "string", pattern: "^a" } } };
  assert.throws(() => generate(schema), /the keyword pattern is not known/);
});

test("a TypeScript harness compiles with tsc --strict", () => {
  assert.ok(existsSync(TSC), "typescript is missing: scripts/_setup.sh installs it");
  const done = spawnSync(process.execPath, [TSC, "--strict", "--noEmit", "--target",
    "es2022", "--module", "nodenext", join(PACKAGE, "test", "typed", "usage.ts")],
  { encoding: "utf8", cwd: PACKAGE });
  assert.equal(done.status, 0, done.stdout + done.stderr);
});
