# The process-vs-thread lab. `just` alone lists the recipes.

# List the recipes
default:
    @just --list

# Run one experiment, e.g. `just run fork-vs-thread --full`
run NAME *FLAGS:
    cargo lab run {{NAME}} {{FLAGS}}

# Run the test suite (the README's test command), then list the skips
test *ARGS:
    cargo lab test {{ARGS}}

# Build the book and open it in a browser
book:
    book/build --open

# Build the book and check every chapter in headless Chromium, as CI does
# (needs chromium and node; screenshots in target/book-check/)
book-check:
    book/build
    npm ci --prefix .ci --no-audit --no-fund
    node .ci/book-check.mjs --self-test --out target/book-check

# Run it on an otherwise idle machine from a clean commit (the runner refuses
# a checkout with uncommitted changes), then commit the folder, and remove the
# previous reference folder if this one replaces it.
#
# Re-run every experiment that feeds the book into one new reference folder, results/<date>-<host>/
results:
    #!/usr/bin/env bash
    set -euo pipefail
    host=$(uname -n | tr 'A-Z' 'a-z' | tr -c 'a-z0-9\n' '-')
    export LAB_RUN_ID="${LAB_RUN_ID:-$(date -u +%F)-${host}}"
    # Every experiment's reference runs, as each declares them
    # (Experiment::reference), and the one-CPU runs the claims ask for.
    cargo lab reference

# Exactly what CI runs
ci:
    bash .ci/run
