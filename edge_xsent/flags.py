"""One command-line flag per recipe setting, made from the config dataclasses (config.py): `max_steps`
is --max-steps, `amp` is --amp/--no-amp, a list is "128,64", and each flag's help is the field's
own comment, its range and the recipe key it overrides. One name per setting, from the TOML to the flag.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import click

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

    from .config import EncoderConfig, TrainConfig

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


def train_options(fn):
    """One option per setting: `max_steps` is --max-steps, `amp` is --amp/--no-amp; its help is the
    field's own comment in config.py, its range, and the recipe key it overrides."""
    from .config import ENCODER_RANGES, TRAIN_RANGES, EncoderConfig, TrainConfig, field_docs

    docs = {False: field_docs(TrainConfig), True: field_docs(EncoderConfig)}
    for name, typ, is_model in reversed(config_fields()):
        flag = name.replace("_", "-")
        where = f"[model] {name}" if is_model else name
        low, high = (ENCODER_RANGES if is_model else TRAIN_RANGES).get(name, (None, None))
        accepts = f" [{low}..{high if high is not None else ''}]" if low is not None else ""
        text = f"{docs[is_model].get(name, '').rstrip('.')}{accepts}. Overrides `{where}`."
        if typ is bool:
            fn = click.option(f"--{flag}/--no-{flag}", name, default=None, help=text)(fn)
        else:
            fn = click.option(f"--{flag}", name, type=typ, default=None, help=text)(fn)
    return fn


def config_from_flags(config_path: Path | None, flags: dict):
    """The TrainConfig of a recipe (or none) with the flags the user gave over it."""
    from .config import TrainConfig

    model_keys = {name for name, _, is_model in config_fields() if is_model}
    overrides: dict = {k: v for k, v in flags.items() if v is not None and k not in model_keys}
    model = {k: v for k, v in flags.items() if v is not None and k in model_keys}
    if model:
        overrides["model"] = model
    return TrainConfig.from_toml(config_path, overrides) if config_path else TrainConfig.from_dict(overrides)
