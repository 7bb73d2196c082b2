// Runs `seam doctor --json` with the interpreter or command the extension starts the server
// with, and turns its report (the shape is in docs/user-guide.md, "Command line") into what the
// status item's tooltip and the "Seam: Diagnose" command show: why Seam is not ready, or why a
// suggestion is not coming, in the doctor's own words and with its fixes.
//
// The checks themselves live in the server's package (lsp_server/diagnosis.py), so that the
// editor, `:checkhealth seam` and a terminal all give the same answer. This module imports
// nothing from `vscode`, so that a test can run it under plain Node against the real doctor.
import { execFile } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** `verdict` of a finding: `note` is worth knowing, `problem` stops suggestions until fixed. */
export type Verdict = "ok" | "note" | "problem";

export interface Finding {
  topic: string;
  verdict: Verdict;
  summary: string;
  fix: string;
  details: Record<string, unknown>;
}

export interface DoctorReport {
  version: string;
  python: string;
  executable: string;
  ok: boolean;
  findings: Finding[];
}

/** A process to run: the same shape as settings.ts's ServerCommand. */
export interface Invocation {
  command: string;
  args: string[];
}

/** What to check besides the installation: the editor's settings and the active file. */
export interface DoctorRequest {
  settings: object;
  file?: string;
  language?: string;
}

/** Either the report, or why there is none (the doctor could not run, or said nothing usable). */
export type DoctorOutcome =
  | { ok: true; report: DoctorReport; invocation: Invocation }
  | { ok: false; error: string; invocation: Invocation };

/** How long the doctor may take: it imports the engine's packages but loads no model. */
export const DOCTOR_TIMEOUT_MS = 60_000;

const VERDICTS: readonly string[] = ["ok", "note", "problem"];

/**
 * The doctor's command from the server's: the words before `serve` (e.g. `seam`, or
 * `python -m lsp_server.cli`), then `doctor --json`. A command without `serve` is taken to be a
 * wrapper of `seam` that accepts its subcommands.
 */
export function doctorInvocation(server: Invocation): Invocation {
  const at = server.args.indexOf("serve");
  const before = at >= 0 ? server.args.slice(0, at) : [];
  return { command: server.command, args: [...before, "doctor", "--json"] };
}

/** Checks the shape of `seam doctor --json`'s output; throws an Error saying what is wrong. */
export function parseDoctorReport(stdout: string): DoctorReport {
  let raw: unknown;
  try {
    raw = JSON.parse(stdout.trim().split("\n").pop() ?? "");
  } catch {
    throw new Error(`not a doctor report: ${stdout.trim().slice(0, 200) || "(no output)"}`);
  }
  const obj = raw as Record<string, unknown> | null;
  if (obj === null || typeof obj !== "object" || !Array.isArray(obj.findings)) {
    throw new Error(`not a doctor report (no findings): ${stdout.trim().slice(0, 200)}`);
  }
  const findings: Finding[] = obj.findings.map((f: Record<string, unknown>, i: number) => {
    if (f === null || typeof f !== "object" || typeof f.summary !== "string" ||
        typeof f.verdict !== "string" || !VERDICTS.includes(f.verdict)) {
      throw new Error(`finding ${i} of the doctor's report is malformed: ${JSON.stringify(f)}`);
    }
    return {
      topic: String(f.topic ?? ""),
      verdict: f.verdict as Verdict,
      summary: f.summary,
      fix: typeof f.fix === "string" ? f.fix : "",
      details: f.details !== null && typeof f.details === "object" ? (f.details as Record<string, unknown>) : {},
    };
  });
  return {
    version: String(obj.version ?? "?"),
    python: String(obj.python ?? "?"),
    executable: String(obj.executable ?? "?"),
    ok: obj.ok === true,
    findings,
  };
}

/** One line per problem, then per note (problems first: they are why nothing comes). */
export function tooltipLines(report: DoctorReport, most = 6): string[] {
  const worst = [
    ...report.findings.filter((f) => f.verdict === "problem"),
    ...report.findings.filter((f) => f.verdict === "note"),
  ];
  const lines = worst.slice(0, most).map((f) => {
    const mark = f.verdict === "problem" ? "Problem" : "Note";
    return `${mark} (${f.topic}): ${f.summary}${f.fix ? ` Fix: ${f.fix}` : ""}`;
  });
  if (worst.length > most) {
    lines.push(`and ${worst.length - most} more: run "Seam: Diagnose".`);
  }
  if (lines.length === 0) {
    lines.push("seam doctor found no problem.");
  }
  return lines;
}

/** The whole report as Markdown, for "Seam: Diagnose". */
export function reportMarkdown(report: DoctorReport, invocation: Invocation): string {
  const marks: Record<Verdict, string> = { ok: "ok", note: "note", problem: "**problem**" };
  const problems = report.findings.filter((f) => f.verdict === "problem").length;
  const lines = [
    "# Seam: Diagnose",
    "",
    `Seam ${report.version}, Python ${report.python} (\`${report.executable}\`).`,
    "",
    problems === 0
      ? "No problem found."
      : `${problems} problem${problems > 1 ? "s" : ""} found: suggestions will not come until ${problems > 1 ? "they are" : "it is"} fixed.`,
    "",
    "| | topic | finding | fix |",
    "|---|---|---|---|",
    ...report.findings.map(
      (f) => `| ${marks[f.verdict]} | ${f.topic} | ${cell(f.summary)} | ${cell(f.fix)} |`,
    ),
    "",
    `From \`${[invocation.command, ...invocation.args].join(" ")}\` (the settings and file this ` +
      "window uses); the same checks run in a terminal with `seam doctor`.",
    "",
  ];
  return lines.join("\n");
}

/** The Markdown shown when the doctor itself could not run. */
export function failureMarkdown(error: string, invocation: Invocation): string {
  return [
    "# Seam: Diagnose",
    "",
    `\`${[invocation.command, ...invocation.args].join(" ")}\` did not give a report:`,
    "",
    "```",
    error,
    "```",
    "",
    "The server runs with the same command, so it cannot start either. Set `seam.server.python` " +
      "to an interpreter that has Seam installed (`pip install 'seam-complete[bundled]'`), or " +
      "`seam.server.command`.",
    "",
  ].join("\n");
}

function cell(text: string): string {
  return text.replace(/\|/g, "\\|").replace(/\n/g, " ");
}

/**
 * Runs the doctor for `server` (the command that starts `seam serve`). The settings go through a
 * private temporary file rather than the command line, where other users' `ps` could read an API
 * key. Exit code 1 means "the report holds a problem", which is a report like any other.
 */
export async function runDoctor(
  server: Invocation,
  request: DoctorRequest,
  timeoutMs = DOCTOR_TIMEOUT_MS,
): Promise<DoctorOutcome> {
  const base = doctorInvocation(server);
  const dir = await mkdtemp(join(tmpdir(), "seam-doctor-"));
  const settingsFile = join(dir, "settings.json");
  const args = [...base.args, "--settings", `@${settingsFile}`];
  if (request.file) {
    args.push("--file", request.file);
    if (request.language) {
      args.push("--language", request.language);
    }
  }
  // What the report says ran: the temporary file is gone by the time anyone reads it.
  const invocation = {
    command: base.command,
    args: args.map((a) => (a === `@${settingsFile}` ? "@<this window's seam settings>" : a)),
  };
  try {
    await writeFile(settingsFile, JSON.stringify(request.settings), { mode: 0o600 });
    const { code, stdout, stderr, error } = await run({ command: base.command, args }, timeoutMs);
    if (code !== 0 && code !== 1) {
      const why = stderr.trim() || error || `exit code ${code}`;
      return { ok: false, error: why, invocation };
    }
    try {
      return { ok: true, report: parseDoctorReport(stdout), invocation };
    } catch (err) {
      // Exit code 1 is also Python's for an uncaught error: then stderr says what went wrong.
      const why = stderr.trim() || (err instanceof Error ? err.message : String(err));
      return { ok: false, error: why, invocation };
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

function run(
  invocation: Invocation,
  timeoutMs: number,
): Promise<{ code: number | null; stdout: string; stderr: string; error: string }> {
  return new Promise((resolve) => {
    execFile(
      invocation.command,
      invocation.args,
      { timeout: timeoutMs, maxBuffer: 4 * 1024 * 1024, env: { ...process.env, PYTHONUNBUFFERED: "1" } },
      (err, stdout, stderr) => {
        const failure = err as (NodeJS.ErrnoException & { code?: number | string; killed?: boolean }) | null;
        let code: number | null = 0;
        let error = "";
        if (failure) {
          if (typeof failure.code === "number") {
            code = failure.code;
          } else {
            code = null; // not started (ENOENT...) or killed
            error = failure.killed ? `no answer in ${timeoutMs / 1000} s` : failure.message;
          }
        }
        resolve({ code, stdout: String(stdout), stderr: String(stderr), error });
      },
    );
  });
}
