#!/usr/bin/env bash
# Fresh machine to first answer: install dependencies, build, and plan an example scenario.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
tools/build.sh
echo
build/planner simulate scenarios/gpt3-175b-1024-gpus.json
echo
build/planner sweep scenarios/slow-network-25gbe.json
echo
build/planner what-if scenarios/slow-network-25gbe.json --nodes 4
echo
build/planner what-if scenarios/gpt3-175b-1024-gpus.json --search
echo
build/planner sweep scenarios/llama3-405b-2k-to-16k-gpus.json
echo
build/planner sweep scenarios/llama3-70b-stragglers.json
echo
build/planner search scenarios/llama2-7b-one-node.json --top 5
echo
build/planner compare scenarios/llama3-70b-h100-h200-b200.json
echo
build/planner compare scenarios/llama3-405b-b200-vs-gb200-nvl72.json
