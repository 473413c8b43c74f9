// Compiled with `tsc --strict --noEmit` by types.test.mjs: the client's API as a
// TypeScript harness uses it; each @ts-expect-error line must be an error.
import { Serve, ServeError, type RunResult, type OutputEvent, type ErrorCode } from "../../index.js";

export async function harness(project: string): Promise<number> {
  const hs = await Serve.start({ project, command: ["harness-sandbox"], noHooks: true });
  const opened = await hs.open({ output_cap: 4 << 20 });
  const banner: string = opened.banner;
  const result: RunResult = await hs.run({ argv: ["make", "test"], timeout: 600 },
    { onOutput: (e: OutputEvent) => console.log(e.data), signal: AbortSignal.timeout(1) });
  const cut: number | null = result.stdout_capped_at;
  for await (const event of hs.stream({ argv: ["ls"] })) {
    const which: "stdout" | "stderr" = event.stream;
    void which;
  }
  const hook = await hs.hook({ event: "PreToolUse", tool: "bash", input: { command: "ls" } });
  const outcome: "allowed" | "blocked" | "interrupted" | "refused" | "error" = hook.outcome;
  const oh = await hs.hookOpenHarness({ event: "preToolUse", tool: "bash" });
  const decision: string | null = oh.decision;
  try {
    await hs.run({ argv: [] });
  } catch (err) {
    if (err instanceof ServeError) {
      const code: ErrorCode | "server_exited" | "spawn_failed" = err.code;
      void code;
    }
  }
  // @ts-expect-error: argv is required
  await hs.run({ timeout: 1 });
  // @ts-expect-error: outcome is not a string of any kind
  const wrong: "passed" = result.outcome;
  // @ts-expect-error: an unknown param
  await hs.open({ projekt: "." });
  void banner; void cut; void outcome; void decision; void wrong;
  const closed = await hs.close();
  return closed.warnings.length;
}
