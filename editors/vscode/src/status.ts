// The status bar item that tells the user what the server is doing: idle (no file to complete
// yet), starting, loading the model (with the server's $/progress percentage), ready, or failed
// (with the server's message), or serving from the local model while the model server is down
// (`fallback`, with the server's message naming the server and since when). When Seam is not ready, the tooltip also holds what
// `seam doctor` found (problems first) and a click runs "Seam: Diagnose" for the full report.
import * as vscode from "vscode";

export type ServerState = "idle" | "starting" | "loading" | "ready" | "error" | "stopped" | "fallback";

export class StatusItem implements vscode.Disposable {
  private readonly item: vscode.StatusBarItem;
  private state: ServerState = "stopped";
  private detail = "";
  private enabled = true;
  private diagnosis: string[] = [];
  /** Whether the active file's suggestions are "exact" or "unchecked" ("" : not a served file). */
  private check = "";
  private checkLanguage = "";
  /** Called with each new state, e.g. to ask the doctor why the server is not ready. */
  onStateChange: ((state: ServerState) => void) | undefined;

  constructor(
    private readonly toggleCommand: string,
    private readonly diagnoseCommand: string,
  ) {
    this.item = vscode.window.createStatusBarItem("seam.status", vscode.StatusBarAlignment.Right, 100);
    this.item.name = "Seam";
    this.render();
    this.item.show();
  }

  get current(): ServerState {
    return this.state;
  }

  set(state: ServerState, detail = ""): void {
    const changed = state !== this.state;
    this.state = state;
    this.detail = detail;
    if (changed) {
      this.diagnosis = []; // it explained the state before
    }
    this.render();
    if (changed) {
      this.onStateChange?.(state);
    }
  }

  /** Whether the state is one the doctor should explain: the server is not running or failed. */
  get needsDiagnosis(): boolean {
    return this.state === "error" || this.state === "stopped";
  }

  /** The doctor's lines for the tooltip (they stay until the state changes). */
  setDiagnosis(lines: string[]): void {
    this.diagnosis = lines;
    this.render();
  }

  /** The tooltip as shown (for the tests and the Diagnose command). */
  get tooltip(): string {
    return typeof this.item.tooltip === "string" ? this.item.tooltip : "";
  }

  /** The active file's kind of suggestions: "exact" (its grammar checks them), "unchecked"
   * (Seam has no grammar for `language`), or "" (Seam does not serve the file). */
  setCheck(check: string, language: string): void {
    this.check = check;
    this.checkLanguage = language;
    this.render();
  }

  /** The active file's kind of suggestions as shown ("" when none is). */
  get currentCheck(): string {
    return this.check;
  }

  setEnabled(enabled: boolean): void {
    this.enabled = enabled;
    this.render();
  }

  private render(): void {
    const icon = {
      idle: "$(circle-outline)",
      starting: "$(loading~spin)",
      loading: "$(loading~spin)",
      ready: "$(check)",
      error: "$(error)",
      stopped: "$(debug-stop)",
      fallback: "$(warning)",
    }[this.state];
    const words = {
      idle: "idle",
      starting: "starting",
      loading: "loading",
      ready: "ready",
      error: "error",
      stopped: "stopped",
      fallback: "fallback",
    }[this.state];
    // The state word is part of the visible text so that it can be read at a glance (and by the
    // end-to-end test), not only from the tooltip.
    // An unchecked file says so in the text: its suggestions may not parse.
    const unchecked = this.check === "unchecked" ? " (unchecked)" : "";
    this.item.text = this.enabled ? `${icon} Seam: ${words}${unchecked}`
      : `$(circle-slash) Seam: off (${words})`;
    const lines = [`Seam server: ${words}`];
    if (this.check === "exact") {
      lines.push(`Suggestions in this ${this.checkLanguage} file are exact: each one parses.`);
    } else if (this.check === "unchecked") {
      lines.push(`Suggestions in this ${this.checkLanguage} file are unchecked: Seam has no ` +
        "grammar for it, so they are not checked to parse.");
    }
    if (this.detail) {
      lines.push(this.detail);
    }
    if (this.diagnosis.length > 0) {
      lines.push("", "seam doctor:", ...this.diagnosis, "");
    }
    if (this.needsDiagnosis) {
      this.item.command = this.diagnoseCommand;
      lines.push("Click for the full diagnosis (Seam: Diagnose).");
    } else {
      this.item.command = this.toggleCommand;
      lines.push(this.enabled ? "Click to turn completions off." : "Click to turn completions on.");
    }
    this.item.tooltip = lines.join("\n");
    this.item.backgroundColor =
      this.state === "error" ? new vscode.ThemeColor("statusBarItem.errorBackground")
        : this.state === "fallback" ? new vscode.ThemeColor("statusBarItem.warningBackground")
          : undefined;
  }

  dispose(): void {
    this.item.dispose();
  }
}
