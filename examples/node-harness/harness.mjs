// An example harness on `harness-sandbox serve`: one session on the example project,
// three bash commands in the box, two hooks, a cancel, and the end.
//
//   node harness.mjs [harness-sandbox command...]
//
// The command defaults to `harness-sandbox` on PATH. The example project and config are
// copied to a temporary folder first (the config with its @HOOKS@ filled in), so the
// checkout is never written.
import { cpSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { ServeClient } from "./serve-client.mjs";

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
  const serve = new ServeClient(command, ["--config", config, "--project", project], env);
  const ready = await serve.ready;
  say(`ready: protocol ${ready.version}`);
  const opened = await serve.open({});
  say(`open: ${opened.banner}; audit ok: ${opened.audit.ok}`);

  // Three bash commands at once; the replies may come in any order.
  const [write, ssh, network] = await Promise.all([
    serve.run(["bash", "-c", "echo hello from the box > note.txt && cat note.txt"]),
    serve.run(["bash", "-c", "cat ~/.ssh/id_rsa ~/.ssh/id_ed25519"]),
    serve.run(["bash", "-c", "exec 3<>/dev/tcp/1.1.1.1/80 && echo connected"]),
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

  let longId;
  const long = serve.run(["bash", "-c", "sleep 600"], {}, (id) => { longId = id; });
  await new Promise((resolve) => setTimeout(resolve, 300));
  const cancelled = await serve.cancel(longId);
  const ended = await long;
  say(`cancel: ${cancelled.cancelled}; the long command: ${ended.outcome} (exit ${ended.exit})`);

  const closed = await serve.close();
  say(`close: exit ${closed.exit}, ${closed.warnings.length} warnings`);
}

main().then(() => rmSync(work, { recursive: true, force: true }), (err) => {
  rmSync(work, { recursive: true, force: true });
  console.error(`node-harness: ${err.stack ?? err}`);
  process.exit(1);
});
