"""Regenerate the committed gRPC stubs from completion.proto (needs grpcio-tools, in the dev extra).

    python proto/generate.py          # rewrite completion_pb2.py, completion_pb2.pyi, completion_pb2_grpc.py
    python proto/generate.py --check  # exit 1 if the committed stubs differ from a fresh generation

The stubs are committed so that installing nestling needs no code generator. They are generated from a
staging copy at nestling/proto/completion.proto so that their imports name the installed package.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUTPUTS = ("completion_pb2.py", "completion_pb2.pyi", "completion_pb2_grpc.py")


def generate(into: Path) -> None:
    from grpc_tools import protoc

    with tempfile.TemporaryDirectory() as tmp:
        staging = Path(tmp) / "nestling" / "proto"
        staging.mkdir(parents=True)
        shutil.copy(HERE / "completion.proto", staging / "completion.proto")
        code = protoc.main(["grpc_tools.protoc", f"-I{tmp}", f"--python_out={tmp}", f"--pyi_out={tmp}",
                            f"--grpc_python_out={tmp}", str(staging / "completion.proto")])
        if code != 0:
            raise SystemExit(f"protoc failed ({code})")
        for name in OUTPUTS:
            shutil.copy(staging / name, into / name)


def main() -> int:
    if "--check" in sys.argv:
        with tempfile.TemporaryDirectory() as tmp:
            generate(Path(tmp))
            stale = [n for n in OUTPUTS if (Path(tmp) / n).read_text() != (HERE / n).read_text()]
        if stale:
            print("stale stubs: " + ", ".join(stale) + " (run python proto/generate.py)")
            return 1
        return 0
    generate(HERE)
    return 0


if __name__ == "__main__":
    sys.exit(main())
