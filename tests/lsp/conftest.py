import sys

from scratch import scratch_folder
from tiny import save_tiny_model_folder

# The tiny model the language server loads (the fixture config is built at import, so is the folder).
MODEL = save_tiny_model_folder(scratch_folder("nestling-lsp-") / "model", never_stop=True)
MODEL_ARGS = ["--model", str(MODEL), "--head", "untrained", "--dtype", "float32"]
EMBEDDED = [sys.executable, "-m", "nestling.daemon.cli.main", "lsp", "--embedded", *MODEL_ARGS]
