;;; emacs_client.el --- Emacs's lsp-mode as the LSP client of `nestling lsp' (run with emacs --batch -Q -l).
;; Registers nestling the way the README says, opens a Python buffer, asks for an inline completion and a
;; completion (through lsp-mode's own completion-at-point too), writes the answers as JSON to
;; $NESTLING_EMACS_OUT and exits.
(require 'package)
;; Debian's elpa-* packages live here; -Q skips the site files that would add them.
(add-to-list 'package-directory-list "/usr/share/emacs/site-lisp/elpa")
(package-initialize)
(require 'json)
(require 'python)
(require 'lsp-mode)

(defun nestling-test-finish (answers)
  (with-temp-file (getenv "NESTLING_EMACS_OUT")
    (insert (json-encode answers)))
  (kill-emacs 0))

(setq lsp-auto-guess-root t
      lsp-enabled-clients '(nestling)
      lsp-session-file (expand-file-name "lsp-session" temporary-file-directory)
      lsp-response-timeout 120
      lsp-enable-snippet nil
      lsp-keep-workspace-alive nil)

;; The README's registration, with the test's command line for the server.
(lsp-register-client
 (make-lsp-client :new-connection (lsp-stdio-connection (append (json-read-from-string (getenv "NESTLING_LSP_CMD")) nil))
                  :activation-fn (lsp-activate-on "python" "javascript" "typescript" "go" "rust" "java" "c" "cpp")
                  :server-id 'nestling
                  :initialization-options (lambda () '(:maxTokens 6))
                  :add-on? t))

(condition-case err
    (let ((file (getenv "NESTLING_FILE")))
      (with-current-buffer (find-file-noselect file)
        (erase-buffer)
        (insert "def main(path):\n    names = \n    return names\n")
        (save-buffer)
        (python-mode)
        (lsp)
        (with-timeout (120 (error "the server did not initialize"))
          (while (not (and lsp--buffer-workspaces
                           (eq (lsp--workspace-status (car lsp--buffer-workspaces)) 'initialized)))
            (accept-process-output nil 0.1)))
        (goto-char (point-min))
        (forward-line 1)
        (end-of-line)
        (let* ((position (lsp--text-document-position-params))
               (caps (lsp--server-capabilities))
               (inline (lsp-request "textDocument/inlineCompletion"
                                    (append position '(:context (:triggerKind 2)))))
               (completion (lsp-request "textDocument/completion" position))
               (capf (lsp-completion-at-point))
               (candidates (and capf (all-completions "" (nth 2 capf)))))
          (nestling-test-finish
           `((inline_provider . ,(if (lsp-get caps :inlineCompletionProvider) t :json-false))
             (inline_items . ,(length (lsp-get inline :items)))
             (completion_incomplete . ,(if (lsp-get completion :isIncomplete) t :json-false))
             (completion_items . ,(length (lsp-get completion :items)))
             (capf_candidates . ,(vconcat (mapcar #'substring-no-properties candidates))))))))
  (error (nestling-test-finish `((error . ,(error-message-string err))))))
