"""`reid data list | info | check | synth` — thin wrappers over :mod:`reidcli.data`."""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer
from rich.console import Console
from rich.table import Table

from reidcli.errors import DatasetError, UsageError

app = typer.Typer(no_args_is_help=True, pretty_exceptions_enable=False)


def parse_key_values(items: List[str] | None, option: str) -> dict:
    """``["a=1", "b=x"]`` → ``{"a": 1, "b": "x"}`` (ints, floats, true/false, none parsed).

    Each key is registered as set by ``option`` (errors about it name ``--option key``)."""
    from reidcli.cli.context import set_flag_names

    out = {}
    for item in items or []:
        if "=" not in item:
            raise UsageError(f"{option} {item!r} is not key=value", f"write e.g. {option} seed=3")
        key, value = item.split("=", 1)
        out[key.strip().replace("-", "_")] = _parse_value(value.strip())
    if option == "--option":             # a loader's hint may name any of its options
        set_flag_names({key: f"--option {key}" for key in _loader_option_names()})
    set_flag_names({key: f"{option} {key}" for key in out})
    return out


def _loader_option_names() -> set[str]:
    """Every dataset loader option that is not also an option of the running command."""
    from reidcli.cli.click_compat import get_current_context

    from reidcli.data.registry import available, info

    ctx = get_current_context(silent=True)
    own = {p.name for p in ctx.command.params} if ctx is not None else set()
    return {key for name in available() for key in info(name).options} - own


def _parse_value(text: str):
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    if low in ("none", "null"):
        return None
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text


@app.command("list")
def list_() -> None:
    """One line per dataset the registry knows: name, aliases, cameras, protocol (the
    expected counts, terms and folder tree: `reid data info NAME`)."""
    from reidcli.data.check import registry_rows

    rows = [(r["name"], r["aliases"] or "—", _short(r["cams"]), _short(r["protocol"]))
            for r in registry_rows()]
    widths = [max(len(row[i]) for row in rows + [_LIST_HEADER]) for i in range(3)]
    for row in [_LIST_HEADER] + rows:
        typer.echo("  ".join(f"{v:<{w}}" for v, w in zip(row, widths)) + "  " + row[3])
    typer.echo("details (counts, terms, expected folder tree): reid data info NAME")


#: the header line of `reid data list`
_LIST_HEADER = ("name", "aliases", "cams", "protocol")


def _short(text) -> str:
    """The head of a registry field: before its parenthesised explanation and its first
    ``;``/``:`` clause, at most 32 characters."""
    head = str(text).split(" (")[0].split(";")[0].split(":")[0].strip()
    return head if len(head) <= 32 else head[:31] + "…"


@app.command("info")
def info_(name: str = typer.Argument(..., help="Dataset name or alias.")) -> None:
    """Where to get a dataset, its terms and the folder tree the loader expects."""
    from reidcli.data.registry import info

    i = info(name)
    console = Console()
    console.print(f"[bold]{i.title}[/bold] ({i.name}; aliases: {', '.join(i.aliases) or '—'})")
    console.print(f"source: {i.url}")
    console.print(f"terms: {i.license}")
    console.print(f"searched under the data root: {', '.join(i.candidates)}")
    console.print("expected tree:")
    console.print(i.tree, markup=False)
    if i.options:
        opts = ", ".join(f"{k}={v!r}" for k, v in i.options.items() if k != "*")
        console.print(f"options (--option key=value): {opts}")
    for note in i.notes:
        console.print(f"note: {note}")


@app.command("check")
def check(
    name: str = typer.Argument(..., help="Dataset name or alias."),
    root: Optional[Path] = typer.Option(None, "--root", help="Data root (default "
                                        "$REIDCLI_DATA or ./data)."),
    option: Optional[List[str]] = typer.Option(None, "--option", help="Loader option "
                                               "key=value (repeatable)."),
    trial: int = typer.Option(0, "--trial", help="Protocol trial to parse."),
    open_images: bool = typer.Option(False, "--open-images", help="Also decode every image "
                                     "of the trial (finds empty or damaged files; slow on "
                                     "a large dataset)."),
) -> None:
    """Parse a dataset copy and print its per-split counts; exit 1 on a broken layout (a
    bad option or --trial is a usage error, exit 2)."""
    from reidcli.data.check import check_dataset
    from reidcli.data.check import open_images as decode_all
    from reidcli.data.registry import info

    try:
        split, rows = check_dataset(name, root, trial=trial,
                                    **parse_key_values(option, "--option"))
        opened = decode_all(split, progress=True) if open_images else None
    except DatasetError as exc:
        typer.echo(f"error: {exc.message}", err=True)
        raise typer.Exit(1)
    table = Table(title=f"{split.name} ({split.protocol}, trial {split.trial} of "
                        f"{split.num_trials}, eval rule {split.eval_rule})")
    for col in ("split", "images", "ids", "cams", "expected (images / ids)"):
        table.add_column(col, justify="right")
    for row in rows:
        mark = "" if row["matches"] is None else (" ✓" if row["matches"] else " ≠")
        table.add_row(row["split"], f"{row['images']:,}", f"{row['ids']:,}", str(row["cams"]),
                      row["expected"] + mark)
    console = Console()
    console.print(table)
    if opened is not None:
        console.print(f"opened all {opened:,} images of the trial")
    for fact in info(name).unconfirmed:
        console.print(f"[yellow]warning:[/yellow] unconfirmed (docs/datasets.md): {fact}")


@app.command("synth")
def synth(
    out: Path = typer.Option(..., "--out", help="Data root; the dataset is written to "
                             "OUT/synthetic/<name>/."),
    preset: str = typer.Option("default", "--preset", help="tiny | default | cdpcf | dart3 | "
                               "vi | dg | warca."),
    seed: Optional[int] = typer.Option(None, "--seed", help="Master seed (default: preset's)."),
    name: Optional[str] = typer.Option(None, "--name", help="Folder name (default: preset)."),
    option: Optional[List[str]] = typer.Option(None, "--option", help="Generator option "
                                               "key=value (repeatable), e.g. num_cameras=4."),
    force: bool = typer.Option(False, "--force", help="Regenerate an existing folder."),
) -> None:
    """Render the procedural synthetic dataset (docs/datasets.md) in the Market-1501 layout."""
    import pandas as pd

    from reidcli.cli.context import set_flag_names
    from reidcli.data.synthetic import generate

    set_flag_names({"root": "--out"})
    path = generate(out, preset=preset, name=name, seed=seed,
                    overrides=parse_key_values(option, "--option"), force=force)
    try:
        images = pd.read_csv(path / "images.csv")
        counts = images.groupby("split").size().to_dict()
    except (OSError, ValueError, KeyError) as exc:    # an existing folder, damaged since
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise DatasetError(f"synthetic dataset {path}: images.csv is damaged ({reason})",
                           "regenerate it (--force)") from None
    typer.echo(f"wrote {path}: {len(images)} images ("
               + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) + ")")
