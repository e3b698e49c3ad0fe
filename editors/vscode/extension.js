// Starts `nestling lsp` and enables its inline completions (a proposed feature in vscode-languageclient 9,
// hence registerProposedFeatures). Completions appear as ghost text; Tab accepts.
const vscode = require("vscode");
const { LanguageClient } = require("vscode-languageclient/node");

let client;

function activate(context) {
  const settings = vscode.workspace.getConfiguration("nestling");
  const languages = ["python", "javascript", "javascriptreact", "typescript", "typescriptreact", "go", "rust",
    "java", "c", "cpp"];
  client = new LanguageClient(
    "nestling",
    "nestling",
    { command: settings.get("command"), args: ["lsp"] },
    {
      documentSelector: languages.map((language) => ({ scheme: "file", language })),
      initializationOptions: { nestling: { maxTokens: settings.get("maxTokens"), lineMode: settings.get("lineMode"),
        prefillOnOpen: settings.get("prefillOnOpen") } },
    },
  );
  client.registerProposedFeatures();
  context.subscriptions.push(client);
  return client.start();
}

function deactivate() {
  return client ? client.stop() : undefined;
}

module.exports = { activate, deactivate };
