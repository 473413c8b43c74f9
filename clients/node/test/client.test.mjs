// The client against the real `harness-sandbox serve`: a boxed run, a hook, streaming
// as a callback and as an iterator, cancel by AbortSignal, 1,000 requests in flight,
// the server killed mid-run, bad input.
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { Serve, ServeError } from "../index.js";
import { world } from "./world.mjs";

async function opened(t, extra = {}) {
  const w = world(t);
  const hs = await Serve.start({ ...w.options, ...extra });
  t.after(() => hs.kill("SIGKILL"));
  await hs.open();
  return hs;
}

test("a boxed run and a hook resolve with the protocol's results", async (t) => {
  const hs = await opened(t);
  assert.equal(hs.limits.output_cap, 1 << 20);
  const r = await hs.run({ argv: ["sh", "-c", "echo hi; cat ~/.ssh/id_rsa 2>/dev/null; exit 3"] });
  assert.deepEqual([r.exit, r.outcome, r.stdout], [3, "exited", "hi\n"]);
  const h = await hs.hook({ event: "PreToolUse", tool: "bash", input: { command: "ls" } });
  assert.equal(h.outcome, "allowed");
  const warned = await hs.hook({ event: "PreToolUse", tool: "Bash", input: {} });
  assert.match(warned.warnings[0], /"Bash" is not a tool here/);
  assert.deepEqual(await hs.close(), { warnings: [] });
  assert.equal(await hs.exited, 0);
});

test("a run streams whole to a callback, before its result", async (t) => {
  const hs = await opened(t);
  const seen = [];
  const r = await hs.run({ argv: ["sh", "-c", "head -c 3000000 /dev/zero; echo end"] },
    { onOutput: (e) => seen.push(e) });
  const out = seen.filter((e) => e.stream === "stdout").map((e) => e.data).join("");
  assert.equal(out.length, 3000000 + 4);
  assert.ok(out.endsWith("\0end\n"));
  assert.deepEqual([r.exit, r.stdout, r.stdout_capped], [0, "", false]);
});

test("a run streams to an async iterator", async (t) => {
  const hs = await opened(t);
  const stream = hs.stream({ argv: ["sh", "-c", "echo one; sleep 0.3; echo two >&2"] });
  const events = [];
  for await (const e of stream) events.push([e.stream, e.data]);
  assert.deepEqual(events, [["stdout", "one\n"], ["stderr", "two\n"]]);
  assert.equal((await stream.result).exit, 0);
});

test("an AbortSignal cancels a run, which resolves cancelled with exit 130", async (t) => {
  const hs = await opened(t);
  const started = Date.now();
  const r = await hs.run({ argv: ["sleep", "30"] }, { signal: AbortSignal.timeout(300) });
  assert.deepEqual([r.outcome, r.exit], ["cancelled", 130]);
  assert.ok(Date.now() - started < 10000);
  let id;
  const long = hs.run({ argv: ["sleep", "30"] }, { onId: (i) => { id = i; } });
  await new Promise((resolve) => setTimeout(resolve, 200));
  assert.deepEqual(await hs.cancel(id), { cancelled: true });
  assert.equal((await long).exit, 130);
});

test("1,000 requests in flight all resolve", async (t) => {
  const hs = await opened(t);
  const all = [];
  for (let i = 0; i < 1000; i++) {
    all.push(i % 2 ? hs.run({ argv: ["true"] })
      : hs.hook({ event: "UserPromptSubmit", prompt: `p${i}` }));
  }
  const results = await Promise.all(all);
  assert.equal(results.filter((r) => r.exit === 0).length, 500);
  assert.equal(results.filter((r) => r.outcome === "allowed").length, 500);
});

test("the server's death rejects every request in flight, and those after", async (t) => {
  const hs = await opened(t);
  const runs = [1, 2, 3].map(() => hs.run({ argv: ["sleep", "30"] }));
  await new Promise((resolve) => setTimeout(resolve, 300));
  hs.kill("SIGKILL");
  for (const run of runs) {
    await assert.rejects(run, (err) => err instanceof ServeError && err.code === "server_exited");
  }
  await assert.rejects(hs.run({ argv: ["true"] }), { code: "server_exited" });
});

test("bad input is a ServeError with the protocol's code, and the session goes on", async (t) => {
  const hs = await opened(t);
  await assert.rejects(hs.run({ argv: [] }), (err) =>
    err instanceof ServeError && err.code === "invalid_params" && err.method === "run");
  await assert.rejects(hs.hook({ event: "Stop" }), { code: "invalid_params" });
  await assert.rejects(hs.open(), { code: "already_open" });
  await assert.rejects(hs.request("nope", {}), { code: "unknown_method" });
  assert.equal((await hs.run({ argv: ["true"] })).exit, 0);
});

test("a program that cannot be started rejects start", async () => {
  await assert.rejects(Serve.start({ command: "/nonexistent/harness-sandbox" }),
    { code: "spawn_failed" });
});

test("hookOpenHarness fires an openHarness event, and says a missing file", async (t) => {
  const hs = await opened(t);
  await assert.rejects(hs.hookOpenHarness({ event: "preToolUse", tool: "bash" }),
    (err) => err instanceof ServeError && err.code === "config" &&
      err.method === "hook_openharness");
  const w = world(t);
  const off = await Serve.start({ ...w.options, noHooks: true });
  t.after(() => off.kill("SIGKILL"));
  await off.open();
  const r = await off.hookOpenHarness({ event: "preToolUse", tool: "bash", input: {} });
  assert.deepEqual([r.version, r.event, r.decision], [1, "preToolUse", null]);
});

test("an AbortSignal interrupts a running hook", async (t) => {
  const w = world(t);
  writeFileSync(join(w.home, "config.toml"), '[[hooks]]\nname = "slow"\n' +
    'event = "PreToolUse"\ncommand = ["/bin/sleep", "30"]\ntimeout = 60\n');
  const hs = await Serve.start(w.options);
  t.after(() => hs.kill("SIGKILL"));
  await hs.open();
  const started = Date.now();
  const r = await hs.hook({ event: "PreToolUse", tool: "bash", input: { command: "ls" } },
    { signal: AbortSignal.timeout(500) });
  assert.equal(r.outcome, "interrupted");
  assert.ok(Date.now() - started < 10000);
});
