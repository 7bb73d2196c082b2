// Entry point of the Seam extension: creates the status bar item and the language client, and
// registers the commands (among them "Seam: Diagnose", which runs `seam doctor`) and the
// settings listener.
import * as vscode from "vscode";
import { SeamClient, served } from "./client";
import { DoctorOutcome, failureMarkdown, reportMarkdown, runDoctor, tooltipLines } from "./doctor";
import { languages, RESTART_KEYS, SECTION, serverCommand, serverSettings } from "./settings";
import { StatusItem } from "./status";

/** `seam doctor` for this window: its server command, its settings, the active editor's file. */
function diagnose(): Promise<DoctorOutcome> {
  const doc = vscode.window.activeTextEditor?.document;
  // The doctor reads the file to check its type; an unsaved buffer has no file to read.
  const file = doc !== undefined && doc.uri.scheme === "file" ? doc.uri.fsPath : undefined;
  return runDoctor(serverCommand(), {
    settings: serverSettings(),
    file,
    language: file !== undefined ? doc?.languageId : undefined,
  });
}

const ENABLED_KEY = "seam.completionsEnabled";

let seam: SeamClient | undefined;
/** Where "Seam: Diagnose" shows its last report. */
const DIAGNOSIS_URI = vscode.Uri.from({ scheme: "seam-doctor", path: "Seam diagnosis.md" });
// Set when the window closes: the server then stops on purpose, and nothing needs diagnosing.
let closing = false;

export function activate(context: vscode.ExtensionContext): void {
  const output = vscode.window.createOutputChannel("Seam", { log: true });
  const status = new StatusItem("seam.toggleCompletions", "seam.diagnose");
  let diagnosisText = "";
  const diagnosisChanged = new vscode.EventEmitter<vscode.Uri>();
  // When the server fails or stops, ask the doctor why, for the tooltip. One run at a time; a
  // state change while it runs makes its answer stale, so it is dropped.
  let diagnosing = false;
  status.onStateChange = (state) => {
    if (closing || !status.needsDiagnosis || diagnosing) {
      return;
    }
    diagnosing = true;
    void diagnose().then((outcome) => {
      diagnosing = false;
      if (status.current !== state) {
        return;
      }
      status.setDiagnosis(outcome.ok ? tooltipLines(outcome.report)
        : [`seam doctor could not run: ${outcome.error}`]);
      output.info(`seam doctor: ${outcome.ok ? tooltipLines(outcome.report).join(" | ") : outcome.error}`);
    });
  };
  // The toggle is a per-user switch that outlives the window, not a setting synced to the server:
  // the server keeps its model loaded while completions are off, so turning them on is instant.
  const isEnabled = () => context.globalState.get<boolean>(ENABLED_KEY, true);
  status.setEnabled(isEnabled());
  seam = new SeamClient(output, status, isEnabled);

  // Loading a model costs seconds and gigabytes: start the server with the first document it
  // would complete, not with every window that happens to load the extension.
  let started = false;
  const start = () => {
    started = true;
    return seam?.restart();
  };
  const wanted = (doc: vscode.TextDocument) => served(doc);

  context.subscriptions.push(
    output,
    status,
    seam,
    vscode.commands.registerCommand("seam.restartServer", start),
    vscode.commands.registerCommand("seam.toggleCompletions", async () => {
      const enabled = !isEnabled();
      await context.globalState.update(ENABLED_KEY, enabled);
      status.setEnabled(enabled);
      void vscode.window.setStatusBarMessage(`Seam completions ${enabled ? "on" : "off"}`, 3000);
    }),
    vscode.commands.registerCommand("seam.showLog", () => output.show(true)),
    vscode.commands.registerCommand("seam.diagnose", async () => {
      const outcome = await vscode.window.withProgress(
        { location: vscode.ProgressLocation.Window, title: "Seam: running seam doctor" },
        diagnose,
      );
      const markdown = outcome.ok ? reportMarkdown(outcome.report, outcome.invocation)
        : failureMarkdown(outcome.error, outcome.invocation);
      if (outcome.ok && status.needsDiagnosis) {
        status.setDiagnosis(tooltipLines(outcome.report));
      }
      output.info(markdown);
      // A read-only document of its own: it updates on the next run and closes without asking
      // whether to save it.
      diagnosisText = markdown;
      diagnosisChanged.fire(DIAGNOSIS_URI);
      const doc = await vscode.workspace.openTextDocument(DIAGNOSIS_URI);
      await vscode.languages.setTextDocumentLanguage(doc, "markdown");
      await vscode.window.showTextDocument(doc, { preview: true });
    }),
    diagnosisChanged,
    vscode.workspace.registerTextDocumentContentProvider(DIAGNOSIS_URI.scheme, {
      onDidChange: diagnosisChanged.event,
      provideTextDocumentContent: () => diagnosisText,
    }),
    vscode.workspace.onDidOpenTextDocument((doc) => {
      if (!started && wanted(doc)) {
        void start();
      }
    }),
    vscode.window.onDidChangeTextEditorSelection((event) => seam?.cursorMoved(event.textEditor)),
    vscode.window.onDidChangeActiveTextEditor((editor) => {
      seam?.showCheck(editor?.document);
      if (editor !== undefined) {
        seam?.cursorMoved(editor);
      }
    }),
    vscode.workspace.onDidChangeConfiguration((event) => {
      if (!started || !event.affectsConfiguration(SECTION)) {
        return;
      }
      if (RESTART_KEYS.some((key) => event.affectsConfiguration(`${SECTION}.${key}`))) {
        void seam?.restart();
      } else {
        void seam?.sendSettings();
      }
    }),
  );
  if (vscode.workspace.textDocuments.some(wanted)) {
    void start(); // not awaited: activation must not wait for the server
  } else {
    const listed = languages();
    status.set("idle", listed.includes("*") ? "Starts with the first file opened."
      : `Starts with the first ${listed.join(" / ")} file.`);
  }
}

export async function deactivate(): Promise<void> {
  closing = true;
  await seam?.stop();
  seam = undefined;
}
