// What a Node.js harness pays for `harness-sandbox serve`, measured from the client:
// a boxed /bin/true, a boxed PreToolUse hook round-trip, and 1,000 requests in flight.
//
//   node bench.mjs ROUNDS [harness-sandbox command...]
//
// Prints one JSON document: medians in milliseconds, and how the 1,000 ended.
import { cpSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { Serve } from "../../clients/node/index.js";

const here = dirname(fileURLToPath(import.meta.url));
const checkout = realpathSync(join(here, "..", ".."));
const rounds = Number(process.argv[2] ?? 30);
const command = process.argv.length > 3 ? process.argv.slice(3) : ["harness-sandbox"];

const work = mkdtempSync(join(tmpdir(), "node-bench-"));
const project = join(work, "project");
cpSync(join(checkout, "examples", "project"), project, { recursive: true });
const config = join(work, "config.toml");
writeFileSync(config, readFileSync(join(checkout, "examples", "config.toml"), "utf8")
  .replaceAll("@HOOKS@", join(checkout, "scripts", "hooks")));
const env = { ...process.env, HARNESS_SANDBOX_NOTIFY_LOG: join(work, "notify.log") };

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

async function timed(rounds, once) {
  const out = [];
  for (let i = 0; i < rounds + 3; i++) {
    const t = process.hrtime.bigint();
    await once();
    if (i >= 3) out.push(Number(process.hrtime.bigint() - t) / 1e6);
  }
  return Math.round(median(out) * 1000) / 1000;
}

async function main() {
  const serve = await Serve.start({ command, config, project, env });
  await serve.open();
  const trueMs = await timed(rounds, () => serve.run({ argv: ["/bin/true"] }));
  const hookMs = await timed(rounds, () => serve.hook({ event: "PreToolUse", tool: "bash",
    input: { command: "ls" } }));
  const t = process.hrtime.bigint();
  const many = await Promise.allSettled(
    Array.from({ length: 1000 }, () => serve.run({ argv: ["/bin/true"] })));
  const manyMs = Number(process.hrtime.bigint() - t) / 1e6;
  const ok = many.filter((r) => r.status === "fulfilled" && r.value.exit === 0).length;
  await serve.close();
  console.log(JSON.stringify({ serve_boxed_true_ms: trueMs, serve_pretooluse_hook_ms: hookMs,
    in_flight_1000_ok: ok, in_flight_1000_ms: Math.round(manyMs) }));
}

main().then(() => rmSync(work, { recursive: true, force: true }), (err) => {
  rmSync(work, { recursive: true, force: true });
  console.error(`bench: ${err.stack ?? err}`);
  process.exit(1);
});
