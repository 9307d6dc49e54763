"""The model card's metadata: a YAML header model hubs read, and a licence line derived from the
training sources' licences."""

import yaml

from edge_xsent.export.card import data_licence, front_matter, hub_languages, yaml_lines


def test_the_licence_follows_the_training_sources():
    permissive = {"wordnet": "WordNet 3.0 example phrases (dict-wn): the WordNet licence (BSD-style)."}
    assert data_licence(permissive)[0] == "apache-2.0"
    mixed = {**permissive, "wesnoth": "Battle for Wesnoth: GPL-2+.", "gnome-help": "GNOME user help: CC-BY-SA-3.0.",
             "lo-ui": "LibreOffice UI strings: MPL-2.0."}
    licence, line = data_licence(mixed)
    assert licence == "other"
    assert "CC-BY-SA, GPL, MPL-2.0" in line and "wesnoth: GPL" in line and "wordnet" not in line  # says which, and why


def test_front_matter_is_yaml_a_hub_reads():
    meta = front_matter({"langs": ["en", "de", "pt_BR", "zh_CN", "zh_TW"]}, "other", ["wesnoth", "ddtp"])
    parsed = yaml.safe_load("\n".join(yaml_lines(meta)).strip().strip("-"))
    assert parsed["license"] == "other" and parsed["license_name"]
    assert parsed["language"] == ["en", "de", "pt", "zh"] == hub_languages(["en", "de", "pt_BR", "zh_CN", "zh_TW"])
    assert parsed["library_name"] == "sentence-transformers" and parsed["pipeline_tag"] == "sentence-similarity"
    assert parsed["training_data"] == ["ddtp", "wesnoth"]


def test_an_exported_bundle_card_starts_with_its_metadata(tiny_bundle):
    card = (tiny_bundle[0] / "README.md").read_text()
    assert card.startswith("---\n")
    meta = yaml.safe_load(card.split("---\n")[1])
    assert meta["license"] == "other"  # the sample corpus holds GPL gettext and MPL LibreOffice text
    assert set(meta["language"]) == {"de", "en", "es", "fr", "it"} and "lo-help" in meta["training_data"]
    assert "Licence: no single licence" in card
