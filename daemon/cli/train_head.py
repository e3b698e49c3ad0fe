"""`nestling train-head`: train an EAGLE head for a model on self-distilled code completions."""

from __future__ import annotations

import argparse
import inspect
import json
import re
import shlex
import signal
import sys
import tempfile
from dataclasses import fields
from pathlib import Path

from ..training.config import DataConfig, TrainConfig, check_settings


def _boolean(text: str) -> bool:
    """true/false, yes/no, on/off or 1/0; anything else is an error (not a silent false)."""
    value = {"1": True, "true": True, "yes": True, "on": True, "0": False, "false": False, "no": False,
             "off": False}.get(text.lower())
    if value is None:
        raise argparse.ArgumentTypeError(f"expected true or false, not {text!r}")
    return value


_FIELD = re.compile(r"(\w+)\s*:[^=]*=.*?(?:#\s*(.*))?$")


def field_comments(cls) -> dict[str, str]:
    """Each dataclass field's comment in its source (comment lines just above it, then the one on its line): the
    settings are documented once, where they are defined, and `--help` reads them from there."""
    try:
        lines = inspect.getsource(cls).splitlines()
    except (OSError, TypeError):  # no source (a frozen build): options without help
        return {}
    comments, above = {}, []
    for line in lines:
        text = line.strip()
        if text.startswith("#"):
            above.append(text.lstrip("#").strip())
            continue
        match = _FIELD.match(text)
        if match and (above or match.group(2)):
            comments[match.group(1)] = " ".join(above + [match.group(2) or ""]).strip()
        above = []
    return comments


def _add_dataclass_options(parser, cls, skip=()) -> None:
    comments = field_comments(cls)
    for f in fields(cls):
        if f.name in skip:
            continue
        flag = "--" + f.name.replace("_", "-")
        default = f.default if not callable(f.default_factory) else f.default_factory()  # type: ignore[misc]
        comment = comments.get(f.name, "").replace("%", "%%")
        if isinstance(default, bool):
            parser.add_argument(flag, type=_boolean, default=default, metavar="BOOL",
                                help=f"{comment} (default: %(default)s)".lstrip())
        elif isinstance(default, list):
            parser.add_argument(flag, action="append", default=[], metavar="PATH", help=f"{comment} (repeatable)")
        else:
            kind = type(default) if default is not None else (float if f.name.endswith("_s") else str)
            parser.add_argument(flag, type=kind, default=default, help=f"{comment} (default: %(default)s)".lstrip())


def add_parser(sub, add_model_options) -> None:
    p = sub.add_parser("train-head", help="train an EAGLE draft head on the model's own completions",
                       description="Corpus -> FIM prompts -> the model's greedy continuations and features -> "
                                   "head training with held-out evaluation. Resumable: rerun the same command.")
    p.add_argument("--out", type=Path, required=True, help="output folder (head/, checkpoint.pt, training.json)")
    p.add_argument("--no-resume", action="store_true", help="start training over even if a checkpoint exists")
    _add_dataclass_options(p, DataConfig)
    _add_dataclass_options(p, TrainConfig, skip=("seed",))
    add_model_options(p, head=False)  # it trains a head (--init-head starts from one): no --head to draft with
    p.add_argument("--head", help=argparse.SUPPRESS)  # only to refuse it by name (run)


def run(args) -> int:
    if args.head is not None:
        raise ValueError("train-head trains a head and drafts with none: drop --head (--init-head DIR starts the "
                         "training from a trained head)")
    args.out = args.out.expanduser()  # (a quoted ~ is the user's home, as for --corpus, in every check and write)
    if args.cache_dir is not None:
        args.cache_dir = str(Path(args.cache_dir).expanduser())
    data = DataConfig(**{f.name: getattr(args, f.name) for f in fields(DataConfig)})
    train = TrainConfig(**{f.name: getattr(args, f.name) for f in fields(TrainConfig) if f.name != "seed"})
    check_settings(data, train)
    if args.out.exists() and not args.out.is_dir():
        raise ValueError(f"--out {args.out}: exists and is not a folder")
    check_out_folder(args.out, data.cache_dir)
    made = []  # folders this run made: gone again if it fails before writing anything in them
    for flag, folder in (("--out", args.out), ("--cache-dir", data.cache_dir)):
        try:  # before the model loads and hours of work begin, not when the first file is written
            if folder is not None and not Path(folder).exists():
                made += [Path(folder)] + [parent for parent in Path(folder).parents if not parent.exists()]
                Path(folder).mkdir(parents=True)
        except OSError as exc:
            raise ValueError(f"{flag} {folder}: cannot make that folder ({exc.strerror or exc})") from None
    try:
        return _train(args, data, train)
    except BaseException:
        for folder in sorted(made, key=lambda made_folder: len(made_folder.parts), reverse=True):  # the deepest first
            if folder.is_dir() and not any(folder.iterdir()):
                folder.rmdir()
        raise


# what train-head writes in --out (and the .tmp files it writes them through): a folder holding anything else is not
# one of its runs
RUN_FILES = {"head", "checkpoint.pt", "draft_vocab.pt", "training.json", "learning_curve.json"}
# a run's output sent there (`> OUT/train.log`, nohup.out, a rotated train.log.1, `| tee OUT/log.txt`) is no stranger
LOG_FILE = re.compile(r".*\.(log|out|err)(\.\d+)?|.*log\.txt", re.IGNORECASE)
CACHE_DEPTH = 3  # how deep in --out an earlier sitting's --cache-dir is looked for


def _holds_cache(folder: Path) -> bool:
    """Whether `folder` is, or holds within CACHE_DEPTH levels, a --cache-dir (or its train/ or held_out/ part)."""
    patterns = [f"{'*/' * depth}{part}manifest.json" for depth in range(CACHE_DEPTH)
                for part in ("train/", "held_out/", "")]
    return any(path.parent.name in ("train", "held_out") for pattern in patterns for path in folder.glob(pattern))


def _stranger(entry: Path, cache: Path | None) -> bool:
    """Whether an entry of --out is none of a run's: its files, its logs, a cache (this run's or an earlier one's) or
    a folder holding one, or a hidden file (.DS_Store)."""
    if entry.name.removesuffix(".tmp") in RUN_FILES:
        return False
    if entry.is_file():
        return not (entry.name.startswith(".") or LOG_FILE.fullmatch(entry.name))
    return not (cache and (entry.resolve() == cache or entry.resolve() in cache.parents) or _holds_cache(entry))


def _is_head(folder: Path) -> bool:
    """Whether a folder with a config.json holds an EAGLE head (one decoder layer), not a model."""
    try:
        return json.loads((folder / "config.json").read_text()).get("num_hidden_layers") == 1
    except (OSError, ValueError, AttributeError):
        return False


def _weights_folder(folder: Path) -> str:
    return "is a head's folder" if _is_head(folder) else "is a model's folder (it holds config.json)"


def check_out_folder(out: Path, cache_dir: str | None) -> None:
    """A ValueError before the model loads when --out holds files of something else than a train-head run (a project,
    a model's or head's folder), when --cache-dir lies in OUT/head, or when --out, its head/ or --cache-dir exists but
    cannot be written (a read-only disk failed only at the first checkpoint, after the distilling)."""
    cache = Path(cache_dir).expanduser().resolve() if cache_dir else None
    if cache_dir is not None and Path(cache_dir).exists() and not Path(cache_dir).is_dir():
        raise ValueError(f"--cache-dir {cache_dir}: exists and is not a folder")
    if cache and (cache / "config.json").is_file():  # (QA: shards were written into the target model's folder)
        raise ValueError(f"--cache-dir {cache_dir}: {_weights_folder(cache)}: give a folder of the cache's own")
    head = (out / "head").resolve()
    if cache and (cache == head or head in cache.parents):
        raise ValueError(f"--cache-dir {cache_dir}: lies in the head's folder {out / 'head'}, which holds the head "
                         "alone (it is what you copy or ship): give another --cache-dir")
    if out.is_dir():
        foreign = sorted(entry.name + ("/" if entry.is_dir() else "") for entry in out.iterdir()
                         if _stranger(entry, cache))
        if (out / "config.json").is_file() and "config.json" in foreign:
            raise ValueError(f"--out {out}: {_weights_folder(out)}, not a train-head run's; give a new folder"
                             + (f" (--init-head {out} fine-tunes that head)" if _is_head(out) else ""))
        if foreign:
            listed = ", ".join(foreign[:4]) + (f" and {len(foreign) - 4} more" if len(foreign) > 4 else "")
            if (out / "checkpoint.pt").exists():  # a run's folder with something else in it
                raise ValueError(f"--out {out}: holds {listed} beside a train-head run's files; move {listed} away "
                                 "to resume the run there")
            raise ValueError(f"--out {out}: holds {listed}, not a train-head run's files; give a new or empty folder "
                             f"(train-head writes {', '.join(sorted(RUN_FILES))} there)")
    for folder, cannot in ((out, f"--out {out}: cannot write there"), (out / "head", f"--out {out}: cannot write in "
                           "its head/"), (cache_dir, f"--cache-dir {cache_dir}: cannot write there")):
        if folder is not None and Path(folder).is_dir():
            try:
                with tempfile.TemporaryFile(dir=folder):
                    pass
            except OSError as exc:
                raise ValueError(f"{cannot} ({exc.strerror or exc})") from None


def _train(args, data, train) -> int:
    """The training run for `train-head` (its folders made)."""
    from ..models.target import load_target
    from ..training.pipeline import run_training
    from ..training.stopping import TrainingStopped

    if train.max_steps == 0:
        print(f"nestling train-head: --max-steps 0: distilling into {data.cache_dir} and scoring the starting head "
              "only; no training steps", file=sys.stderr)
    target = load_target(args.model, device=args.device, dtype=args.dtype)
    command = "nestling " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    try:
        card = run_training(target, data, train, args.out, command=command, resume=not args.no_resume)
    except TrainingStopped as stopped:
        print(stopped, file=sys.stderr)
        return 128 + (stopped.signal or signal.SIGINT)  # (130 for Ctrl-C, 143 for SIGTERM, as a shell reports them)
    print(json.dumps({"head": str(args.out / "head"), "best": card["best"], "steps": card["steps"]}, indent=2))
    if card["stopped_by_signal"]:
        print(f"stopped at step {card['steps']}: the checkpoint in {args.out} is saved; the same command resumes",
              file=sys.stderr)
        return 128 + (card.get("signal") or signal.SIGINT)
    return 0
