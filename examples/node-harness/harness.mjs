// An example harness on `harness-sandbox serve`, through the Node.js client package
// (clients/node; a harness of its own installs it with npm): one session on the
// example project, three bash commands in the box, two hooks, a cancel, and the end.
//
//   node harness.mjs [harness-sandbox command...]
//
// The command defaults to `harness-sandbox` on PATH. The example project and config are
// copied to a temporary folder first (the config with its @HOOKS@ filled in), so the
// checkout is never written.
import { appendFileSync, cpSync, mkdtempSync, readFileSync, realpathSync, rmSync,
  writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { Serve } from "../../clients/node/index.js";

const here = dirname(fileURLToPath(import.meta.url));
const checkout = realpathSync(join(here, "..", ".."));
const command = process.argv.length > 2 ? process.argv.slice(2) : ["harness-sandbox"];

const work = mkdtempSync(join(tmpdir(), "node-harness-"));
const project = join(work, "project");
cpSync(join(checkout, "examples", "project"), project, { recursive: true });
const config = join(work, "config.toml");
const hooks = join(checkout, "scripts", "hooks");
writeFileSync(config, readFileSync(join(checkout, "examples", "config.toml"), "utf8")
  .replaceAll("@HOOKS@", hooks));
const env = { ...process.env, HARNESS_SANDBOX_NOTIFY_LOG: join(work, "notify.log") };

const say = (line) => console.log(line);
const firstLine = (text) => text.trim().split("\n")[0] ?? "";

async function main() {
  // HS_SERVE_TAP=FILE keeps every line the server wrote, for a look afterwards.
  const tap = env.HS_SERVE_TAP;
  const serve = new Serve({ command, config, project, env,
    onLine: tap ? (line) => appendFileSync(tap, line + "\n") : undefined });
  const ready = await serve.ready;
  say(`ready: protocol ${ready.version}`);
  const opened = await serve.open();
  say(`open: ${opened.banner}; audit ok: ${opened.audit.ok}`);

  // Three bash commands at once; the replies may come in any order.
  const bash = (line) => serve.run({ argv: ["bash", "-c", line] });
  const [write, ssh, network] = await Promise.all([
    bash("echo hello from the box > note.txt && cat note.txt"),
    bash("cat ~/.ssh/id_rsa ~/.ssh/id_ed25519"),
    bash("exec 3<>/dev/tcp/1.1.1.1/80 && echo connected"),
  ]);
  say(`run write: exit ${write.exit}: ${firstLine(write.stdout)}`);
  say(`run ssh: exit ${ssh.exit}, key printed: ${ssh.stdout.length > 0}`);
  say(`  ${firstLine(ssh.stderr)}`);
  say(`run network: exit ${network.exit}, connected: ${network.stdout.includes("connected")}`);
  say(`  ${firstLine(network.stderr)}`);
  say(`note.txt on the host: ${firstLine(readFileSync(join(project, "note.txt"), "utf8"))}`);

  const push = await serve.hook({ event: "PreToolUse", tool: "bash",
    input: { command: "git push --force origin main" } });
  say(`hook PreToolUse: ${push.outcome}: ${push.message}`);
  const prompt = await serve.hook({ event: "UserPromptSubmit",
    prompt: "ooo seed my requirements" });
  say(`hook UserPromptSubmit: ${prompt.outcome}, ${prompt.contexts.length} context: ` +
      firstLine(prompt.contexts[0] ?? ""));

  let longId;  // (an AbortSignal in the run's options cancels it as well)
  const long = serve.run({ argv: ["bash", "-c", "sleep 600"] }, { onId: (id) => { longId = id; } });
  await new Promise((resolve) => setTimeout(resolve, 300));
  const cancelled = await serve.cancel(longId);
  const ended = await long;
  say(`cancel: ${cancelled.cancelled}; the long command: ${ended.outcome} (exit ${ended.exit})`);

  const closed = await serve.close();
  say(`close: exit ${await serve.exited}, ${closed.warnings.length} warnings`);
}

main().then(() => rmSync(work, { recursive: true, force: true }), (err) => {
  rmSync(work, { recursive: true, force: true });
  console.error(`node-harness: ${err.stack ?? err}`);
  process.exit(1);
});
