#!/usr/bin/env bash
# The name the shipped default's card gives its command (`train/ship.sh train/shipped.toml`): the command is
# train/ship.py now (one Python entry; the stages in train/pipeline.py). Arguments pass through.
exec python "$(dirname "$0")/ship.py" "$@"
