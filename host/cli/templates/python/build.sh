#!/bin/sh
# Builds {{crate}}.wasm from app.py with componentize-py (pip install -r requirements.txt).
set -eu
cd "$(dirname "$0")"
componentize-py -d wit -w toolkit componentize app -p . -o {{crate}}.wasm
echo "built {{crate}}.wasm"
