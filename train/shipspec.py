"""The shipping spec: a recipe's `[ship]` table, which `python train/ship.py RECIPE` follows after the run
(train/pipeline.py's stages). It lives with the lab's scripts, not in the package: `edge-xsent train` reads the
same recipe and leaves this table alone."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path

from edge_xsent.config import DEFAULT_INT8_ACTIVATIONS, INT8_ACTIVATIONS, TABLE_BITS, TrainConfig, as_table, read_recipe
from edge_xsent.errors import UserError

SHIP_RULES = ("multilingual", "student", "gpu-students", "quality")  # train/ship.py's rules: studies/shipping-history/multilingual-default.md,
# studies/pruned-student/README.md

SHIP_PARTS = ("general", "oog", "oog_wide", "oog_small", "corpus_g", "speed")  # train/figures.py's parts


@dataclass
class ShipConfig:
    """A recipe's `[ship]` table: the shipping spec. What `python train/ship.py RECIPE` does after the run
    (alpha, the export's settings, the rule), the benchmarks its figures read, and how each dataset the
    ship reads is built where it is missing (`datasets`: path -> `edge-xsent data` arguments), so the recipe
    carries every step that made the shipped model. `edge-xsent train` ignores it."""

    alpha: float | None = None  # ship start + alpha x (trained - start), WiSE-FT (train/interpolate.py); None ships the run as trained
    table_bits: int = 8  # the int8 graph's token table: 8, or 4 (`edge-xsent export --table-bits`)
    int8_activations: str = DEFAULT_INT8_ACTIVATIONS  # `edge-xsent export --int8-activations`: per-row for a student
    rule: str = "multilingual"  # the rule train/ship.py judges by (SHIP_RULES; `ship.py --rule`)
    data: str | None = None  # the judging corpus (general test split; calibration's valid split): the run's data if unset
    oog: str = "~/edge-xsent-data/oog"  # the old languages' out-of-genre benchmark
    oog_wide: str = "~/edge-xsent-data/oog-m1"  # the out-of-genre benchmark over every language
    corpus_g: str = "~/edge-xsent-data/corpus-g5"  # the old languages' corpus (software and general test)
    parts: tuple[str, ...] = SHIP_PARTS  # the figures measured (train/figures.py --parts)
    results: str = "benchmarks/results/candidates"  # where the figures, the decision and the ship record go
    datasets: dict[str, str] = field(default_factory=dict)  # path -> `edge-xsent data ...` arguments that build it

    @classmethod
    def from_toml(cls, path: str | Path) -> "ShipConfig":
        raw = read_recipe(path)
        TrainConfig.from_recipe(raw, str(path))  # the whole recipe is checked, [ship] included
        return cls.from_dict(raw.get("ship", {}), str(path))

    @classmethod
    def from_dict(cls, raw, where: str = "config") -> "ShipConfig":
        as_table(raw, "ship", where)
        keys = {f.name for f in fields(cls)}
        unknown = set(raw) - keys
        if unknown:
            raise UserError(f"{where}: unknown keys {sorted(unknown)} in [ship]; valid keys: {sorted(keys)}")
        cfg = cls(**{k: tuple(v) if k == "parts" and isinstance(v, list) else v for k, v in raw.items()})
        cfg.check(where)
        if cfg.alpha is not None:
            cfg.alpha = float(cfg.alpha)
        return cfg

    def check(self, where: str) -> None:
        alpha, bits = self.alpha, self.table_bits
        if alpha is not None and (isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 < alpha <= 1):
            raise UserError(f"{where}: [ship] alpha must be a number in (0, 1], got {alpha!r}")
        if isinstance(bits, bool) or bits not in TABLE_BITS[:2]:  # a tiered table (1) needs its exact rows: student_folder.py
            raise UserError(f"{where}: [ship] table_bits must be one of {list(TABLE_BITS[:2])}, got {bits!r}")
        if self.rule not in SHIP_RULES:
            raise UserError(f"{where}: [ship] rule must be one of {list(SHIP_RULES)}, got {self.rule!r}")
        if self.int8_activations not in INT8_ACTIVATIONS:
            raise UserError(f"{where}: [ship] int8_activations must be one of {list(INT8_ACTIVATIONS)}, "
                            f"got {self.int8_activations!r}")
        for key in ("data", "oog", "oog_wide", "corpus_g", "results"):
            value = getattr(self, key)
            if not (value is None and key == "data") and (not isinstance(value, str) or not value):
                raise UserError(f"{where}: [ship] {key} must be a path (a string), got {value!r}")
        if not isinstance(self.parts, tuple) or not self.parts or set(self.parts) - set(SHIP_PARTS):
            raise UserError(f"{where}: [ship] parts must be a list of {list(SHIP_PARTS)}, got {self.parts!r}")
        if not isinstance(self.datasets, dict) or not all(isinstance(v, str) and v.split()[:1] in (["build"], ["reserved"])
                                                          for v in self.datasets.values()):
            raise UserError(f"{where}: [ship.datasets] maps a path to `edge-xsent data` arguments that begin with "
                            f"build or reserved (\"~/edge-xsent-data/oog\" = \"reserved\"), got {self.datasets!r}")
