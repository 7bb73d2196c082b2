// Owns the language client for `seam serve`: starts and restarts it, forwards settings, follows
// the model's lifecycle (the server reports loading through $/progress and a failed load through
// window/showMessage) into the status bar, and gates completions behind the on/off toggle.
import * as vscode from "vscode";
import {
  DidChangeConfigurationNotification,
  LanguageClient,
  LanguageClientOptions,
  MessageType,
  ServerOptions,
  ShowMessageNotification,
  ShowMessageParams,
  State,
  WorkDoneProgressBegin,
  WorkDoneProgressEnd,
  WorkDoneProgressReport,
} from "vscode-languageclient/node";
import {
  ALL_LANGUAGES,
  completionItems,
  languages,
  SECTION,
  servesLanguage,
  serverCommand,
  serverSettings,
} from "./settings";
import { StatusItem } from "./status";

type Progress = WorkDoneProgressBegin | WorkDoneProgressReport | WorkDoneProgressEnd;

/** The document schemes Seam completes in (with the languages of `seam.languages`): saved and
 * untitled files and notebook cells, never the editor's own documents (output, settings, git). */
export const DOCUMENT_SCHEMES = ["file", "untitled", "vscode-notebook-cell"];

/** Whether Seam serves this document: a scheme above and a language of `seam.languages`. */
export function served(doc: vscode.TextDocument): boolean {
  return DOCUMENT_SCHEMES.includes(doc.uri.scheme) && servesLanguage(doc.languageId);
}

/** How long the cursor must rest before the server hears of it. */
const CURSOR_DEBOUNCE_MS = 150;

/** The server's own notification of the model's state (lsp_server/messages.py; the shape is in
 * docs/INTERFACES.md, and tests/lsp_server/test_messages.py checks these names against it). */
interface SeamStatus {
  state: string;
  model?: string | null;
  message?: string;
  /** Which engine answers now ("server" or "local"), absent while none does. */
  serving?: string;
}

/** The answer to the `seam/status` request: the notification's members and more, of which the
 * extension reads the language ids whose suggestions are exact (every other file's are
 * unchecked). */
interface SeamStatusReply extends SeamStatus {
  checked?: string[];
}

export class SeamClient implements vscode.Disposable {
  private client: LanguageClient | undefined;
  private cursorTimer: ReturnType<typeof setTimeout> | undefined;
  private readonly activeProgress = new Set<string | number>();
  private starting: Promise<void> | undefined;
  /** The language ids whose suggestions a grammar checks (from the server's `seam/status`
   * answer); every other file's are unchecked. Undefined until the server says. */
  private checked: string[] | undefined;

  constructor(
    private readonly output: vscode.LogOutputChannel,
    private readonly status: StatusItem,
    private readonly isEnabled: () => boolean,
  ) {}

  /** Starts a fresh server process; a running one is stopped first. */
  async restart(): Promise<void> {
    // Serialise restarts: a burst of setting changes must not leave two servers running.
    const previous = this.starting ?? Promise.resolve();
    this.starting = previous.then(() => this.stopQuietly()).then(() => this.start());
    return this.starting;
  }

  private async start(): Promise<void> {
    const { command, args } = serverCommand();
    const serverOptions: ServerOptions = {
      command,
      args,
      options: { env: { ...process.env, PYTHONUNBUFFERED: "1" } },
    };
    // Saved and untitled files, and the code cells of notebooks (a Jupyter notebook's Python
    // cells are documents of their own, in the `vscode-notebook-cell` scheme).
    // Every file type by default (`seam.languages` is ["*"]), or the languages it lists.
    const listed = languages();
    const selector = listed.includes(ALL_LANGUAGES)
      ? DOCUMENT_SCHEMES.map((scheme) => ({ scheme }))
      : listed.flatMap((language) => DOCUMENT_SCHEMES.map((scheme) => ({ language, scheme })));
    const clientOptions: LanguageClientOptions = {
      documentSelector: selector,
      outputChannel: this.output,
      initializationOptions: { [SECTION]: serverSettings() },
      middleware: {
        provideInlineCompletionItems: (document, position, context, token, next) =>
          this.isEnabled() ? next(document, position, context, token) : null,
        provideCompletionItem: (document, position, context, token, next) =>
          this.isEnabled() && completionItems() ? next(document, position, context, token) : null,
        handleWorkDoneProgress: (token, params, next) => {
          this.onProgress(token, params);
          next(token, params);
        },
        workspace: {
          // The server may pull settings instead of waiting for pushes: answer with the same
          // translated values as the pushes, not VS Code's raw `seam` section.
          configuration: (params, token, next) => {
            const ours = params.items.map((item) => item.section === SECTION);
            if (!ours.some((x) => x)) {
              return next(params, token);
            }
            return params.items.map((item) => (item.section === SECTION ? serverSettings() : null));
          },
        },
      },
    };
    const client = new LanguageClient("seam", "Seam", serverOptions, clientOptions);
    // Registered before start so that it replaces the client's default handler on every
    // (re)connection: errors must reach the status bar, not only a notification toast.
    client.onNotification(ShowMessageNotification.type, (params) => this.onShowMessage(params));
    client.onNotification("seam/status", (params: SeamStatus) => this.onSeamStatus(params));
    client.onDidChangeState((event) => {
      if (event.newState === State.Stopped && this.client === client && this.status.current !== "error") {
        this.status.set("stopped", "The server process is not running. Run \"Seam: Restart Server\".");
      }
    });
    this.client = client;
    this.activeProgress.clear();
    this.status.set("starting", `${command} ${args.join(" ")}`);
    this.output.info(`starting: ${command} ${args.join(" ")}`);
    try {
      await client.start();
    } catch (err) {
      const reason = err instanceof Error ? err.message : String(err);
      const hint =
        `Seam could not start its server (${command} ${args.join(" ")}): ${reason}. ` +
        "Set seam.server.python to an interpreter that has Seam installed, or seam.server.command.";
      this.status.set("error", hint);
      this.output.error(hint);
      void vscode.window.showErrorMessage(hint);
      return;
    }
    // The server starts loading the model only after `initialized`, so "running" is not
    // "ready". Ask it where the load stands: a load that finished before any progress reached
    // us would otherwise leave the item at "starting" forever. Later notifications still win,
    // since the server answers and notifies in one ordered stream.
    if (this.status.current === "starting") {
      this.status.set("loading", "waiting for the server to load the model");
    }
    try {
      const now = await client.sendRequest<SeamStatusReply>("seam/status", {});
      if (this.client === client && Array.isArray(now.checked)) {
        this.checked = now.checked.filter((id) => typeof id === "string");
        this.showCheck(vscode.window.activeTextEditor?.document);
      }
      if (this.client === client && now.state !== "idle") {
        this.onSeamStatus(now);
      }
    } catch (err) {
      // A server without the request still reports through $/progress and showMessage.
      this.output.info(`seam/status request unanswered: ${err instanceof Error ? err.message : err}`);
    }
  }

  private onProgress(token: string | number, params: Progress): void {
    if (params.kind === "begin") {
      this.activeProgress.add(token);
      this.status.set("loading", describe(params.title, params.message, params.percentage));
    } else if (params.kind === "report") {
      if (this.status.current !== "error") {
        this.status.set("loading", describe("", params.message, params.percentage));
      }
    } else {
      this.activeProgress.delete(token);
      // An error (or the fallback) reported while loading wins over the end of the progress
      // that follows it.
      if (this.activeProgress.size === 0 && this.status.current !== "error" &&
          this.status.current !== "fallback") {
        this.status.set("ready", params.message ?? "Model loaded.");
      }
    }
  }

  // The most direct signal: the server says which state the model is in. Progress and
  // showMessage above cover servers (or moments) without it.
  private onSeamStatus(params: SeamStatus): void {
    const message = params.message ?? "";
    if (params.state === "loading") {
      this.status.set("loading", message);
    } else if (params.state === "ready") {
      this.status.set("ready", message);
    } else if (params.state === "error") {
      this.status.set("error", message);
    } else if (params.state === "fallback") {
      // The model server is down; the message says which and since when, and whether the
      // local model serves yet or loads (then `serving` is absent).
      this.status.set("fallback", message);
    }
  }

  private onShowMessage(params: ShowMessageParams): void {
    this.output.info(`server message: ${params.message}`);
    switch (params.type) {
      case MessageType.Error:
        this.status.set("error", params.message);
        void vscode.window.showErrorMessage(params.message, "Show Log").then((choice) => {
          if (choice) {
            this.output.show(true);
          }
        });
        break;
      case MessageType.Warning:
        void vscode.window.showWarningMessage(params.message);
        break;
      default:
        void vscode.window.showInformationMessage(params.message);
    }
  }

  /** Shows in the status item whether `doc`'s suggestions are exact or unchecked (nothing
   * for a document Seam does not serve, or before the server said which languages it checks). */
  showCheck(doc: vscode.TextDocument | undefined): void {
    if (doc === undefined || !served(doc) || this.checked === undefined) {
      this.status.setCheck("", "");
      return;
    }
    this.status.setCheck(this.checked.includes(doc.languageId) ? "exact" : "unchecked",
      doc.languageId);
  }

  /**
   * Tells the server where the cursor is (`seam/cursor`), so that it can put the prompt there
   * into the model's cache while the user pauses: the request that follows then only decodes.
   * Called on every selection change; only the last position of a burst is sent, after
   * `CURSOR_DEBOUNCE_MS`.
   */
  cursorMoved(editor: vscode.TextEditor): void {
    clearTimeout(this.cursorTimer);
    this.cursorTimer = setTimeout(() => {
      const client = this.client;
      const doc = editor.document;
      if (client === undefined || !client.isRunning() || !this.isEnabled() ||
          !served(doc) || editor.selections.length !== 1 ||
          !editor.selection.isEmpty) {
        return;
      }
      const pos = editor.selection.active;
      void client.sendNotification("seam/cursor", {
        textDocument: { uri: client.code2ProtocolConverter.asUri(doc.uri) },
        position: { line: pos.line, character: pos.character },
      }).catch(() => undefined);
    }, CURSOR_DEBOUNCE_MS);
  }

  /** Pushes the current settings; the server reloads the model only if a model key changed. */
  async sendSettings(): Promise<void> {
    const client = this.client;
    if (client === undefined || !client.isRunning()) {
      return;
    }
    const settings = serverSettings();
    this.output.info(`settings changed; sending ${JSON.stringify(settings)}`);
    await client.sendNotification(DidChangeConfigurationNotification.type, {
      settings: { [SECTION]: settings },
    });
  }

  private async stopQuietly(): Promise<void> {
    const client = this.client;
    this.client = undefined;
    if (client === undefined) {
      return;
    }
    try {
      if (client.isRunning()) {
        await client.stop(5000);
      }
      await client.dispose();
    } catch (err) {
      this.output.warn(`stopping the server: ${err instanceof Error ? err.message : err}`);
    }
  }

  async stop(): Promise<void> {
    await (this.starting ?? Promise.resolve()).catch(() => undefined);
    await this.stopQuietly();
    this.status.set("stopped");
  }

  dispose(): void {
    clearTimeout(this.cursorTimer);
    void this.stop();
  }
}

function describe(title: string, message: string | undefined, percentage: number | undefined): string {
  const parts = [title, message].filter((x): x is string => Boolean(x));
  if (typeof percentage === "number") {
    parts.push(`${Math.round(percentage)}%`);
  }
  return parts.join(" ");
}
